package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// Density is the phase `density`: how many idle Python sessions one machine holds. Sessions
// are added until each level of levels is reached (every one has run `import numpy, pandas`,
// no client attached); at each level, the memory charged to each session's cgroup, the fall
// of the host's MemAvailable since the phase began, and the round trip of one session's
// `Exec("x = 1")` while all the others idle. Beside them, as many bare containers of the
// python image as the last level, each with a python3 that imported numpy and pandas and
// sleeps: their memory per container.
func (r *Runner) Density(ctx context.Context, levels []int) error {
	if len(levels) == 0 {
		return nil
	}
	sort.Ints(levels)
	availBefore := memAvailable()
	var names []string
	defer func() {
		parallel(len(names), 6, func(i int) { _ = r.remove(context.WithoutCancel(ctx), names[i]) })
	}()
	for _, level := range levels {
		add := level - len(names)
		fresh := make([]string, add)
		errs := make([]error, add)
		parallel(add, 4, func(i int) {
			name := r.sessionName(fmt.Sprintf("dens%03d", len(names)+i))
			fresh[i] = name
			s, err := r.start(ctx, session.Spec{Name: name})
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			_, errs[i] = execOK(ctx, s, "import numpy, pandas", session.ExecOptions{})
		})
		names = append(names, fresh...)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("density %d: %w", level, err)
		}
		// The snapshots after the imports land, the engine settles.
		for _, n := range fresh {
			if _, err := r.waitSnapshot(ctx, n, 1); err != nil {
				return err
			}
		}
		time.Sleep(3 * time.Second)
		per, total := r.cgroupMemory(ctx, names)
		r.R.Add(fmt.Sprintf("density.memory_per_session.%d", level), MiB, "lower",
			fmt.Sprintf("memory charged to each of %d idle sessions' cgroups (numpy and pandas imported, no client attached): usage less inactive file", level), per...)
		r.R.Add(fmt.Sprintf("density.memory_total.%d", level), MiB, "lower", fmt.Sprintf("the sum over the %d sessions", level), total)
		if availBefore > 0 {
			if after := memAvailable(); after > 0 {
				r.R.Add(fmt.Sprintf("density.host_memory_used.%d", level), MiB, "lower",
					fmt.Sprintf("informational: fall of the host's MemAvailable with %d idle sessions (adds the engine's shims; other load on the machine counts too)", level), float64(availBefore-after)/(1<<20))
			}
		}
		// One session's round trip while the others idle.
		s, _, err := r.C.Open(ctx, names[0])
		if err != nil {
			return err
		}
		var rtt []float64
		for i := 0; i < r.n(100, 20); i++ {
			t := time.Now()
			if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
				s.Close()
				return err
			}
			rtt = append(rtt, ms(time.Since(t)))
		}
		s.Close()
		r.R.Add(fmt.Sprintf("density.exec_rtt.%d", level), Ms, "lower",
			fmt.Sprintf("Exec(`x = 1`) round trip of one of %d sessions while the others idle (default snapshot policy)", level), rtt...)
	}
	top := levels[len(levels)-1]
	parallel(len(names), 6, func(i int) { _ = r.remove(ctx, names[i]) })
	names = nil
	time.Sleep(2 * time.Second)
	return r.densityBare(ctx, top)
}

// densityBare runs count bare containers of the python image, python3 having imported numpy
// and pandas, and measures their memory.
func (r *Runner) densityBare(ctx context.Context, count int) error {
	ids := make([]string, count)
	errs := make([]error, count)
	defer parallel(count, 6, func(i int) {
		if ids[i] != "" {
			_ = r.D.Remove(context.WithoutCancel(ctx), ids[i])
		}
	})
	availBefore := memAvailable()
	parallel(count, 4, func(i int) {
		ids[i], errs[i] = r.D.Run(ctx, ContainerSpec{Image: PythonImage,
			Entrypoint: []string{"python3", "-c", "import numpy, pandas, time; time.sleep(3600)"}})
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("density: bare containers: %w", err)
	}
	// The imports take seconds each on a loaded machine: wait until the sum stops growing.
	per, total := r.cgroupMemory(ctx, ids)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(3 * time.Second)
		p2, t2 := r.cgroupMemory(ctx, ids)
		grew := t2 > total*1.01
		per, total = p2, t2
		if !grew {
			break
		}
	}
	r.R.Add(fmt.Sprintf("density.bare_python_memory.%d", count), MiB, "lower",
		fmt.Sprintf("memory charged to each of %d bare containers of the python image running python3 -c 'import numpy, pandas, time; time.sleep(3600)'", count), per...)
	r.R.Add(fmt.Sprintf("density.bare_python_total.%d", count), MiB, "lower", fmt.Sprintf("the sum over the %d bare containers", count), total)
	if availBefore > 0 {
		if after := memAvailable(); after > 0 {
			r.R.Add(fmt.Sprintf("density.bare_host_memory_used.%d", count), MiB, "lower",
				fmt.Sprintf("informational: fall of the host's MemAvailable with the %d bare containers", count), float64(availBefore-after)/(1<<20))
		}
	}
	r.R.Compare(fmt.Sprintf("density.memory_per_session.%d", count), fmt.Sprintf("density.bare_python_memory.%d", count), Target{})
	return nil
}

// cgroupMemory reads each container's cgroup memory (usage less inactive file), in MiB, and
// their sum.
func (r *Runner) cgroupMemory(ctx context.Context, names []string) ([]float64, float64) {
	var mu sync.Mutex
	var per []float64
	var total float64
	parallel(len(names), 8, func(i int) {
		id := names[i]
		if len(id) < 64 { // a session's name, not a container id
			id = containerOf(id)
		}
		u, err := r.D.MemoryUsage(ctx, id)
		if err != nil {
			return
		}
		mu.Lock()
		per = append(per, float64(u)/(1<<20))
		total += float64(u) / (1 << 20)
		mu.Unlock()
	})
	return per, total
}

// Throughput is the phase `throughput`: count sessions at once, each a client executing
// `x = 1` back to back for the phase's duration: executions per second over all of them, and
// the latency of each execution (p50, p99).
func (r *Runner) Throughput(ctx context.Context, count int) error {
	names := make([]string, count)
	sess := make([]*session.Session, count)
	errs := make([]error, count)
	defer func() {
		for _, s := range sess {
			if s != nil {
				s.Close()
			}
		}
		parallel(count, 6, func(i int) {
			if names[i] != "" {
				_ = r.remove(context.WithoutCancel(ctx), names[i])
			}
		})
	}()
	parallel(count, 4, func(i int) {
		names[i] = r.sessionName(fmt.Sprintf("tput%02d", i))
		sess[i], errs[i] = r.start(ctx, session.Spec{Name: names[i]})
		if errs[i] == nil {
			_, errs[i] = execOK(ctx, sess[i], "x = 1", session.ExecOptions{})
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	time.Sleep(2 * time.Second)
	dur := time.Duration(float64(10*time.Second) * r.Scale)
	if dur < 3*time.Second {
		dur = 3 * time.Second
	}
	lat := make([][]float64, count)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	var t0 time.Time
	for i := range sess {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			for time.Since(t0) < dur {
				t := time.Now()
				if _, err := execOK(ctx, sess[i], "x = 1", session.ExecOptions{}); err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], ms(time.Since(t)))
			}
		}(i)
	}
	t0 = time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(t0)
	var all []float64
	for _, l := range lat {
		all = append(all, l...)
	}
	r.R.Add(fmt.Sprintf("throughput.execs_per_s.%d", count), "exec/s", "higher",
		fmt.Sprintf("executions of `x = 1` per second over %d sessions at once, each a client executing back to back (default snapshot policy)", count), float64(len(all))/wall.Seconds())
	r.R.Add(fmt.Sprintf("throughput.exec_rtt.%d", count), Ms, "lower",
		fmt.Sprintf("the round trip of each of those executions, %d sessions at once", count), all...)
	return errors.Join(errs...)
}
