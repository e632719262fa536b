package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// Pool is pair 11: starts served from a warm pool (`runtimectl pool`). One at a time: Client.Start
// of a new session to the result of Exec(`x = 1`), the pool refilled between them (not timed),
// interleaved with a cold start of the same kind (a setting the pool does not serve) and with
// `docker run --rm`; then count sessions started at the same moment from a pool of count.
func (r *Runner) Pool(ctx context.Context, count int) error {
	one := session.Pool{Name: "rtbench-" + r.RunID, Lang: "python", Memory: 1 << 30, Preload: "import numpy, pandas", Size: 1}
	n := r.n(8, 3)
	fill, done, err := r.filledPool(ctx, one)
	defer done()
	if err != nil {
		return err
	}
	r.R.Add("pool.fill_one", S, "lower", "informational: FillPool making one member (container, volumes, interpreter with `import numpy, pandas` preloaded, ready)", fill)

	startFirst := func(spec session.Spec, wantPool bool) (float64, error) {
		t := time.Now()
		s, info, err := func() (*session.Session, session.StartInfo, error) {
			r.mu.Lock()
			r.sessions[spec.Name] = true
			r.mu.Unlock()
			return r.C.Start(ctx, spec)
		}()
		if err != nil {
			return 0, err
		}
		_, err = execOK(ctx, s, "x = 1", session.ExecOptions{})
		d := time.Since(t)
		s.Close()
		if err == nil && wantPool != (info.Pool != "") {
			err = fmt.Errorf("start of %s: served from pool %q, wanted from a pool: %v", spec.Name, info.Pool, wantPool)
		}
		if rerr := r.remove(ctx, spec.Name); rerr != nil && err == nil {
			err = rerr
		}
		return secs(d), err
	}
	dockerRun := []string{"docker", "run", "--rm", "--entrypoint", "python3", PythonImage, "-c", "pass"}
	for i := 0; i < n; i++ {
		r.C.WaitRefills()
		v, err := startFirst(session.Spec{Name: r.sessionName("pool"), Memory: 1 << 30}, true)
		if err != nil {
			return err
		}
		r.R.Add("pool.start_to_first_result", S, "lower", "Client.Start of a new session that a warm pool serves (the pool refilled before each, not timed) to the result of Exec(`x = 1`)", v)
		// The pool refills the member just claimed: the cold start waits for that, so that it
		// is not timed against a member's start and preload on the same cores.
		r.C.WaitRefills()
		v, err = startFirst(session.Spec{Name: r.sessionName("pool-cold"), Memory: 1<<30 + 1<<20}, false)
		if err != nil {
			return err
		}
		r.R.Add("pool.cold_start", S, "lower", "the same start with a setting no pool serves (1 GiB + 1 MiB of memory): made cold", v)
		d, err := timeCommand(ctx, dockerRun)
		if err != nil {
			return err
		}
		r.R.Add("pool.docker_run", S, "lower", "`docker run --rm --entrypoint python3 IMG -c pass` as a whole command, in the same phase", secs(d))
	}
	r.C.WaitRefills()
	r.R.Compare("pool.start_to_first_result", "pool.docker_run", Target{"ratio", "<=", 0.25})
	r.R.Compare("pool.start_to_first_result", "pool.cold_start", Target{})
	r.R.Compare("pool.cold_start", "pool.docker_run", Target{"ratio", "<=", 1})
	return r.poolMany(ctx, count)
}

// filledPool sets the pool p and fills it, returning how long the fill took (seconds) and what
// removes the pool again (call it even on an error): the starts' refills stop at the pool's
// removal, and what one made meanwhile goes after them.
func (r *Runner) filledPool(ctx context.Context, p session.Pool) (float64, func(), error) {
	done := func() {
		cctx := context.WithoutCancel(ctx)
		_ = r.C.RemovePool(cctx, p.Name)
		r.C.WaitRefills()
		_ = r.C.RemovePool(cctx, p.Name)
	}
	if err := r.C.SetPool(ctx, p); err != nil {
		return 0, done, err
	}
	t := time.Now()
	_, _, err := r.C.FillPool(ctx, p.Name)
	return secs(time.Since(t)), done, err
}

// poolMany starts count sessions at the same moment from a pool of count (256 MiB each, as in
// the many phase).
func (r *Runner) poolMany(ctx context.Context, count int) error {
	p := session.Pool{Name: "rtbench-" + r.RunID + "-many", Lang: "python", Memory: 256 << 20, Size: count}
	fill, done, err := r.filledPool(ctx, p)
	defer done()
	if err != nil {
		return err
	}
	r.R.Add("pool.fill_many", S, "lower", fmt.Sprintf("informational: FillPool making the %d members, one after the other", count), fill)
	names := make([]string, count)
	times := make([]float64, count)
	errs := make([]error, count)
	for i := range names {
		names[i] = r.sessionName(fmt.Sprintf("poolmany%02d", i))
		r.mu.Lock()
		r.sessions[names[i]] = true
		r.mu.Unlock()
	}
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range names {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			t := time.Now()
			s, info, err := r.C.Start(ctx, session.Spec{Name: names[i], Memory: 256 << 20})
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
				errs[i] = err
				return
			}
			times[i] = secs(time.Since(t))
			if info.Pool == "" {
				errs[i] = fmt.Errorf("%s was not served from the pool", names[i])
			}
		}(i)
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(t0)
	served := 0
	for i, err := range errs {
		if err == nil {
			served++
			r.R.Add("pool.many_start", S, "lower", fmt.Sprintf("each of %d sessions started at the same moment from a pool of %d (256 MiB each): its Client.Start to the result of its Exec(`x = 1`)", count, count), times[i])
		}
	}
	r.R.Add("pool.many_served", Count, "higher", fmt.Sprintf("sessions of the %d that a pool member served and answered", count), float64(served))
	r.R.Add("pool.many_all_ready", S, "lower", fmt.Sprintf("wall time until all %d had answered", count), secs(wall))
	r.R.Bound("pool.many_all_ready", Target{"value", "<=", 2})
	if err := errors.Join(errs...); err != nil {
		r.R.Note("pool many: %v", err)
	}
	var rerrs []error
	var rmu sync.Mutex
	parallel(count, 6, func(i int) {
		if err := r.remove(ctx, names[i]); err != nil {
			rmu.Lock()
			rerrs = append(rerrs, err)
			rmu.Unlock()
		}
	})
	return errors.Join(rerrs...)
}
