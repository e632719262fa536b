package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// Restore is pair 6: a session holding a 100 MiB array is stopped and started again; the time
// from the Start call to the result of its first execution, against the same for a session
// with an empty state.
func (r *Runner) Restore(ctx context.Context) error {
	full, empty, numpy := r.sessionName("restore-full"), r.sessionName("restore-empty"), r.sessionName("restore-numpy")
	for _, name := range []string{full, empty, numpy} {
		s, err := r.start(ctx, session.Spec{Name: name})
		if err != nil {
			return err
		}
		switch name {
		case full:
			_, err = execOK(ctx, s, StateArray.Setup, session.ExecOptions{})
		case numpy:
			_, err = execOK(ctx, s, "import numpy as np", session.ExecOptions{})
		}
		s.Close()
		if err != nil {
			return err
		}
	}
	cycle := func(name string) (float64, error) {
		if err := r.C.Stop(ctx, name); err != nil {
			return 0, err
		}
		t := time.Now()
		s, _, err := r.C.Start(ctx, session.Spec{Name: name})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		d := time.Since(t)
		if name == full {
			if ri := s.Restored(); ri == nil || !contains(ri.Restored, "a") {
				return 0, fmt.Errorf("session %s came back without its array: %+v", name, ri)
			}
		}
		return secs(d), nil
	}
	if _, err := cycle(full); err != nil { // not counted: the first stop of each
		return err
	}
	if _, err := cycle(empty); err != nil {
		return err
	}
	if _, err := cycle(numpy); err != nil {
		return err
	}
	for i, n := 0, r.n(6, 3); i < n; i++ {
		v, err := cycle(full)
		if err != nil {
			return err
		}
		r.R.Add("restore.array_100mib", S, "lower", "a stopped session holding a 100 MiB ndarray: Client.Start to the result of Exec(`x = 1`), the state restored", v)
		v, err = cycle(empty)
		if err != nil {
			return err
		}
		r.R.Add("restore.empty_state", S, "lower", "the same stop and start for a session with an empty state", v)
		v, err = cycle(numpy)
		if err != nil {
			return err
		}
		r.R.Add("restore.numpy_imported", S, "lower", "informational: the same for a session whose state is only `import numpy as np` (the array's restore re-imports numpy too)", v)
	}
	r.R.Compare("restore.array_100mib", "restore.empty_state", Target{"delta", "<=", 0.5})
	r.R.Compare("restore.array_100mib", "restore.numpy_imported", Target{})
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// StdoutCode writes 100 MiB to standard output.
const StdoutCode = "import sys\nsys.stdout.buffer.write(b'x' * (100 << 20))\nsys.stdout.flush()"

// Stdout is pair 7: 100 MiB written by the code and streamed to an ExecOptions.Stdout writer (StreamOnly), against
// `head -c 100M /dev/zero` read through a docker exec stream. Both are timed from the first
// byte received to the end (the Exec's result; EOF).
func (r *Runner) Stdout(ctx context.Context) error {
	s, err := r.start(ctx, session.Spec{Name: r.sessionName("stdout")})
	if err != nil {
		return err
	}
	defer s.Close()
	cid, err := r.D.Run(ctx, ContainerSpec{Image: PythonImage, Entrypoint: []string{"sleep", "infinity"}})
	if err != nil {
		return err
	}
	const total = 100 << 20
	viaSession := func() (float64, error) {
		var first time.Time
		var got int64
		res, err := execOK(ctx, s, StdoutCode, session.ExecOptions{MaxOutput: 200 << 20, StreamOnly: true, Stdout: writerFunc(func(p []byte) {
			if first.IsZero() {
				first = time.Now()
			}
			got += int64(len(p))
		})})
		if err != nil {
			return 0, err
		}
		d := time.Since(first)
		if got != total || res.StdoutTruncated != 0 {
			return 0, fmt.Errorf("stdout: got %d bytes (truncated %d), want %d", got, res.StdoutTruncated, total)
		}
		return mibps(got, d), nil
	}
	viaDocker := func() (float64, error) {
		es, err := r.D.Exec(ctx, cid, []string{"head", "-c", strconv.Itoa(total), "/dev/zero"}, "", false)
		if err != nil {
			return 0, err
		}
		defer es.Close()
		buf := make([]byte, 32<<10)
		n, err := es.Read(buf)
		if err != nil {
			return 0, err
		}
		first := time.Now()
		rest, err := io.CopyBuffer(io.Discard, es, buf)
		if err != nil {
			return 0, err
		}
		d := time.Since(first)
		if got := int64(n) + rest; got != total {
			return 0, fmt.Errorf("docker exec head: got %d bytes, want %d", got, total)
		}
		return mibps(total, d), nil
	}
	if _, err := viaSession(); err != nil {
		return err
	}
	if _, err := viaDocker(); err != nil {
		return err
	}
	for i, n := 0, r.n(6, 3); i < n; i++ {
		v, err := viaSession()
		if err != nil {
			return err
		}
		r.R.Add("stdout_throughput.runtimectl", MiBps, "higher", "100 MiB written by sys.stdout.buffer.write, streamed to an ExecOptions.Stdout writer (StreamOnly, MaxOutput 200 MiB); first byte to the Exec's result", v)
		v, err = viaDocker()
		if err != nil {
			return err
		}
		r.R.Add("stdout_throughput.docker_exec", MiBps, "higher", "docker exec of `head -c 100M /dev/zero` read through ContainerExecAttach (no TTY); first byte to EOF", v)
	}
	r.R.Compare("stdout_throughput.runtimectl", "stdout_throughput.docker_exec", Target{"ratio", ">=", 0.8})
	return nil
}

// Memory is pair 8: the memory charged to an idle session's container cgroup after `import
// numpy, pandas` (no client attached), against a bare container of the same image whose python3
// imported numpy and pandas and sleeps.
func (r *Runner) Memory(ctx context.Context) error {
	const k = 2
	var names []string
	for i := 0; i < k; i++ {
		name := r.sessionName("mem")
		s, err := r.start(ctx, session.Spec{Name: name})
		if err != nil {
			return err
		}
		_, err = execOK(ctx, s, "import numpy, pandas", session.ExecOptions{})
		s.Close()
		if err != nil {
			return err
		}
		names = append(names, name)
	}
	var bare []string
	for i := 0; i < k; i++ {
		id, err := r.D.Run(ctx, ContainerSpec{Image: PythonImage, Entrypoint: []string{"python3", "-c", "import numpy, pandas, time; time.sleep(600)"}})
		if err != nil {
			return err
		}
		bare = append(bare, id)
	}
	// Let the imports finish and the snapshot after the session's import land.
	time.Sleep(4 * time.Second)
	for _, name := range names {
		if _, err := r.waitSnapshot(ctx, name, 1); err != nil {
			return err
		}
	}
	time.Sleep(time.Second)
	for round := 0; round < 3; round++ {
		for i := 0; i < k; i++ {
			u, err := r.D.MemoryUsage(ctx, containerOf(names[i]))
			if err != nil {
				return err
			}
			r.R.Add("idle_memory.runtimectl", MiB, "lower", "memory charged to an idle session's container cgroup (tini, agent, kernel; no client attached) after `import numpy, pandas`: usage less inactive file cache", float64(u)/(1<<20))
			u, err = r.D.MemoryUsage(ctx, bare[i])
			if err != nil {
				return err
			}
			r.R.Add("idle_memory.bare_python", MiB, "lower", "the same for a bare container of the python image running python3 -c 'import numpy, pandas, time; time.sleep(600)'", float64(u)/(1<<20))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// With a client attached: the relay process joins the container's cgroup.
	for _, name := range names {
		s, _, err := r.C.Open(ctx, name)
		if err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		u, err := r.D.MemoryUsage(ctx, containerOf(name))
		s.Close()
		if err != nil {
			return err
		}
		r.R.Add("idle_memory.runtimectl_client_attached", MiB, "lower", "informational: the same idle session while a library client holds its stream open (the relay runs in the container)", float64(u)/(1<<20))
	}
	r.R.Compare("idle_memory.runtimectl", "idle_memory.bare_python", Target{"delta", "<=", 5})
	r.R.Compare("idle_memory.runtimectl_client_attached", "idle_memory.bare_python", Target{})
	for _, id := range bare {
		_ = r.D.Remove(ctx, id)
	}
	for _, name := range names {
		_ = r.remove(ctx, name)
	}
	return nil
}

// Many is pair 9: count sessions (256 MiB limit each) started at once, each timed from its Start
// call to the result of its first execution, with the memory they hold once idle, against one
// session started alone.
func (r *Runner) Many(ctx context.Context, count int) error {
	spec := func(what string) session.Spec {
		return session.Spec{Name: r.sessionName(what), Memory: 256 << 20}
	}
	startOne := func(sp session.Spec) (float64, error) {
		t := time.Now()
		s, err := r.start(ctx, sp)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		return secs(time.Since(t)), nil
	}
	// One alone, three times.
	for i := 0; i < 3; i++ {
		sp := spec("one")
		v, err := startOne(sp)
		if err != nil {
			return err
		}
		r.R.Add("many.one_start", S, "lower", "one session (256 MiB limit) started alone: Client.Start to the result of Exec(`x = 1`)", v)
		time.Sleep(2 * time.Second)
		if u, err := r.D.MemoryUsage(ctx, containerOf(sp.Name)); err == nil {
			r.R.Add("many.one_memory", MiB, "lower", "memory charged to that idle session's cgroup (usage less inactive file)", float64(u)/(1<<20))
		}
		if err := r.remove(ctx, sp.Name); err != nil {
			return err
		}
	}

	availBefore := memAvailable()
	specs := make([]session.Spec, count)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf("many%02d", i))
	}
	times := make([]float64, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	t0 := time.Now()
	for i := range specs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			times[i], errs[i] = startOne(specs[i])
		}(i)
	}
	close(gate)
	wg.Wait()
	wall := time.Since(t0)
	var ok []int
	var failures []string
	for i, err := range errs {
		if err == nil {
			ok = append(ok, i)
			r.R.Add("many.start", S, "lower", fmt.Sprintf("each of %d sessions (256 MiB limit each) started at the same moment: its Client.Start to the result of its Exec(`x = 1`)", count), times[i])
		} else {
			failures = append(failures, err.Error())
		}
	}
	r.R.Add("many.sessions_started", Count, "higher", fmt.Sprintf("sessions of the %d started at once that answered", count), float64(len(ok)))
	r.R.Add("many.all_ready", S, "lower", "wall time until every one of them had answered (or failed)", secs(wall))
	if len(failures) > 0 {
		sort.Strings(failures)
		r.R.Note("%d of %d sessions started at once failed; first: %s", len(failures), count, failures[0])
	}
	time.Sleep(3 * time.Second)
	var mu sync.Mutex
	var total int64
	parallel(len(ok), 8, func(k int) {
		u, err := r.D.MemoryUsage(ctx, containerOf(specs[ok[k]].Name))
		if err != nil {
			return
		}
		mu.Lock()
		total += u
		mu.Unlock()
		r.R.Add("many.memory_per_session", MiB, "lower", "memory charged to each idle session's cgroup, all of them running", float64(u)/(1<<20))
	})
	r.R.Add("many.memory_total", MiB, "lower", "sum of the sessions' cgroup memory (usage less inactive file), all running and idle", float64(total)/(1<<20))
	if availBefore > 0 {
		if after := memAvailable(); after > 0 {
			r.R.Add("many.host_memory_used", MiB, "lower", "informational: fall of the host's MemAvailable while they run (adds the engine's per-container shims; other load on the machine counts too)", float64(availBefore-after)/(1<<20))
		}
	}
	if err := r.manyDocker(ctx, count); err != nil {
		r.R.Note("many: the docker baseline failed: %v", err)
	}
	r.R.Compare("many.start", "many.one_start", Target{})
	r.R.Compare("many.start", "many.docker_start", Target{})
	r.R.Compare("many.memory_per_session", "many.one_memory", Target{})
	var rerrs []error
	var rmu sync.Mutex
	parallel(count, 6, func(i int) {
		if err := r.remove(ctx, specs[i].Name); err != nil {
			rmu.Lock()
			rerrs = append(rerrs, err)
			rmu.Unlock()
		}
	})
	return errors.Join(rerrs...)
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes (0 when unknown).
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// manyDocker starts count bare containers of the python image at once (256 MiB limit, no
// network, python3 sleeping): the engine's own cost of starting that many containers.
func (r *Runner) manyDocker(ctx context.Context, count int) error {
	ids := make([]string, count)
	errs := make([]error, count)
	times := make([]float64, count)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			t := time.Now()
			ids[i], errs[i] = r.D.Run(ctx, ContainerSpec{Image: PythonImage, Memory: 256 << 20,
				Entrypoint: []string{"python3", "-c", "import time; time.sleep(600)"}})
			times[i] = secs(time.Since(t))
		}(i)
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			r.R.Add("many.docker_start", S, "lower", fmt.Sprintf("informational: each of %d bare containers of the python image (256 MiB limit, python3 sleeping) created and started at the same moment through the API", count), times[i])
		}
	}
	parallel(count, 6, func(i int) {
		if ids[i] != "" {
			_ = r.D.Remove(ctx, ids[i])
		}
	})
	return errors.Join(errs...)
}

// writerFunc is a function as an io.Writer.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
