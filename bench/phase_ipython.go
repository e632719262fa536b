package bench

import (
	"context"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// plainPython is the session setting that keeps IPython out of the Python kernel (the
// figures without it).
var plainPython = []string{"RUNTIMECTL_IPYTHON=0"}

// IPython is the cost of IPython semantics in the Python kernel (issue 23): the round trip of
// `x = 1` and of an expression shown with its mime bundle, the cold start (to `x = 1`, which
// does not build the shell, and to a shown `42`, which does), and the idle memory after
// `import numpy, pandas` and the shown expressions, each against the same session with RUNTIMECTL_IPYTHON=0 (plain
// Python), the two sides interleaved.
func (r *Runner) IPython(ctx context.Context) error {
	with, err := r.start(ctx, session.Spec{Name: r.sessionName("ipy")})
	if err != nil {
		return err
	}
	defer with.Close()
	plain, err := r.start(ctx, session.Spec{Name: r.sessionName("ipy-plain"), Env: plainPython})
	if err != nil {
		return err
	}
	defer plain.Close()
	rtt := func(s *session.Session, code string) (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, s, code, session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	for _, s := range []*session.Session{with, plain} {
		for i := 0; i < 20; i++ { // warm up
			if _, err := rtt(s, "x = 1"); err != nil {
				return err
			}
		}
	}
	for round := 0; round < r.n(5, 2); round++ {
		for i := 0; i < 20; i++ {
			for _, side := range []struct {
				s    *session.Session
				name string
			}{{with, "ipython"}, {plain, "plain"}} {
				v, err := rtt(side.s, "x = 1")
				if err != nil {
					return err
				}
				r.R.Add("ipython_rtt."+side.name, Ms, "lower", "Session.Exec(`x = 1`) on a warm Python session ("+side.name+")", v)
				v, err = rtt(side.s, "x")
				if err != nil {
					return err
				}
				r.R.Add("ipython_expr_rtt."+side.name, Ms, "lower", "Session.Exec(`x`): a value shown (with IPython: the display hook, Out, an execute_result display) ("+side.name+")", v)
			}
		}
	}
	r.R.Compare("ipython_rtt.ipython", "ipython_rtt.plain", Target{})
	r.R.Compare("ipython_expr_rtt.ipython", "ipython_expr_rtt.plain", Target{})

	cold := func(what string, env []string) (float64, error) { return r.startToFirstResult(ctx, what, env...) }
	for i, n := 0, r.n(6, 3); i < n; i++ {
		v, err := cold("ipy-cold", nil)
		if err != nil {
			return err
		}
		r.R.Add("ipython_cold_start.ipython", S, "lower", "Client.Start of a new Python session to the result of Exec(`x = 1`) (IPython)", v)
		v, err = cold("ipy-cold-plain", plainPython)
		if err != nil {
			return err
		}
		r.R.Add("ipython_cold_start.plain", S, "lower", "the same with RUNTIMECTL_IPYTHON=0 (plain Python)", v)
	}
	r.R.Compare("ipython_cold_start.ipython", "ipython_cold_start.plain", Target{})
	// The shell is built at its first use: the first shown value pays for it.
	for i, n := 0, r.n(6, 3); i < n; i++ {
		v, err := r.startToResultOf(ctx, "ipy-first", "42", nil...)
		if err != nil {
			return err
		}
		r.R.Add("ipython_first_display.ipython", S, "lower", "Client.Start of a new Python session to the result of Exec(`42`), a value shown: the cell that builds IPython's shell", v)
		v, err = r.startToResultOf(ctx, "ipy-first-plain", "42", plainPython...)
		if err != nil {
			return err
		}
		r.R.Add("ipython_first_display.plain", S, "lower", "the same with RUNTIMECTL_IPYTHON=0 (plain Python)", v)
	}
	r.R.Compare("ipython_first_display.ipython", "ipython_first_display.plain", Target{})

	for _, s := range []*session.Session{with, plain} {
		if _, err := execOK(ctx, s, "import numpy, pandas", session.ExecOptions{}); err != nil {
			return err
		}
	}
	time.Sleep(3 * time.Second)
	for _, s := range []*session.Session{with, plain} {
		if _, err := r.waitSnapshot(ctx, s.Name(), 1); err != nil {
			return err
		}
	}
	with.Close()
	plain.Close()
	time.Sleep(time.Second)
	for round := 0; round < 3; round++ {
		for _, side := range []struct{ name, session string }{{"ipython", with.Name()}, {"plain", plain.Name()}} {
			u, err := r.D.MemoryUsage(ctx, containerOf(side.session))
			if err != nil {
				return err
			}
			r.R.Add("ipython_idle_memory."+side.name, MiB, "lower", "an idle Python session's container cgroup after the round trips, the shown expressions (which build IPython's shell) and `import numpy, pandas`, no client attached ("+side.name+")", float64(u)/(1<<20))
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.R.Compare("ipython_idle_memory.ipython", "ipython_idle_memory.plain", Target{})
	return nil
}
