package bench

import (
	"context"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/runtimectl/runtimectl/tcsession"
)

// TCSession is what a session costs a Go test: tcsession.Run (testcontainers-go creating the
// container, waiting for the agent's hello) to the result of RunCode(`x = 1`), interleaved with
// the library's own Client.Start to the result of Exec(`x = 1`); and Terminate, which removes
// the container and its volume, as the test's cleanup pays it.
func (r *Runner) TCSession(ctx context.Context) error {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true") // `make bench` sets it: no registry to pull the reaper from
	}
	image := tcsession.Image("python")
	viaTC := func() (float64, float64, error) {
		name := r.sessionName("tc")
		r.mu.Lock()
		r.sessions[name] = true // removed by Cleanup if Terminate does not get to it
		r.mu.Unlock()
		t := time.Now()
		c, err := tcsession.Run(ctx, image, tcsession.WithLanguage("python"), testcontainers.WithName(name))
		if err == nil {
			_, err = c.RunCode(ctx, "x = 1")
		}
		d := time.Since(t)
		t = time.Now()
		if terr := testcontainers.TerminateContainer(c); terr != nil && err == nil {
			err = terr
		}
		return secs(d), secs(time.Since(t)), err
	}
	viaLibrary := func() (float64, error) { return r.startToFirstResult(ctx, "tc-lib") }
	// One of each first, not counted: page cache and the engine's caches.
	if _, _, err := viaTC(); err != nil {
		return err
	}
	if _, err := viaLibrary(); err != nil {
		return err
	}
	for i, n := 0, r.n(8, 3); i < n; i++ {
		run, term, err := viaTC()
		if err != nil {
			return err
		}
		r.R.Add("tcsession.run_to_first_result", S, "lower", "what a session costs a Go test: tcsession.Run (testcontainers-go, Ryuk disabled) to the result of RunCode(`x = 1`)", run)
		r.R.Add("tcsession.terminate", S, "lower", "informational: Terminate (stop, remove the container and its volume), the test's cleanup", term)
		v, err := viaLibrary()
		if err != nil {
			return err
		}
		r.R.Add("tcsession.client_start", S, "lower", "the library's Client.Start of a new session to the result of Exec(`x = 1`), interleaved", v)
	}
	r.R.Compare("tcsession.run_to_first_result", "tcsession.client_start", Target{})
	return nil
}
