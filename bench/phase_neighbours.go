package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// Neighbours measures what two busy sessions cost a third: the round trip of Exec(`x = 1`) on
// a session while two others, with the default limits (1 CPU each, equal CPU weight), run
// `while True: pass`, against the same round trip with the two idle. On a 2-core machine the
// burners can take at most their two CPUs' worth; the default CPU weight shares what is left.
func (r *Runner) Neighbours(ctx context.Context) error {
	var burners []*session.Session
	for i := 0; i < 2; i++ {
		s, err := r.start(ctx, session.Spec{Name: r.sessionName(fmt.Sprintf("burn%d", i))})
		if err != nil {
			return err
		}
		defer s.Close()
		burners = append(burners, s)
	}
	probe, err := r.start(ctx, session.Spec{Name: r.sessionName("probe")})
	if err != nil {
		return err
	}
	defer probe.Close()
	rtt := func() (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, probe, "x = 1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	for i := 0; i < 30; i++ { // warm up
		if _, err := rtt(); err != nil {
			return err
		}
	}
	burning := func(on bool) error {
		for _, b := range burners {
			if !on {
				if _, err := b.Interrupt(ctx); err != nil {
					return err
				}
				continue
			}
			go func(b *session.Session) {
				_, _ = b.Exec(ctx, "while True: pass", session.ExecOptions{Timeout: 10 * time.Minute})
			}(b)
		}
		time.Sleep(time.Second) // let them run (or stop) for a moment
		return nil
	}
	rounds, batch := r.n(10, 3), 20
	for i := 0; i < rounds; i++ {
		for k := 0; k < batch; k++ {
			v, err := rtt()
			if err != nil {
				return err
			}
			r.R.Add("neighbours_rtt.idle", Ms, "lower", "Exec(`x = 1`) round trip on a session while two other sessions are idle", v)
		}
		if err := burning(true); err != nil {
			return err
		}
		for k := 0; k < batch; k++ {
			v, err := rtt()
			if err != nil {
				return err
			}
			r.R.Add("neighbours_rtt.two_burners", Ms, "lower", "the same round trip while two other sessions (default limits: 1 CPU, CPU shares 512) run `while True: pass`", v)
		}
		if err := burning(false); err != nil {
			return err
		}
	}
	r.R.Compare("neighbours_rtt.two_burners", "neighbours_rtt.idle", Target{"ratio", "<=", 2})
	return nil
}
