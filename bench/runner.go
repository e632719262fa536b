package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/session"
)

// SessionPrefix starts the name of every session the benchmarks create.
const SessionPrefix = "rtbench-"

// PythonImage is the session image, and the image of the bare baselines (its tag follows
// RUNTIMECTL_IMAGE_TAG, as the sessions' does).
var PythonImage = "runtimectl/python:" + images.Tag()

// Runner runs the phases and owns what they create.
type Runner struct {
	C          *session.Client
	D          *Docker
	R          *Results
	RunID      string
	Runtimectl string  // path of the built bin/runtimectl
	Scale      float64 // multiplies every n (1 is the default run)
	Log        io.Writer

	mu       sync.Mutex
	sessions map[string]bool
}

// NewRunID returns a short random id for one run.
func NewRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewRunner returns a runner; Cleanup must be called when it is done.
func NewRunner(c *session.Client, d *Docker, r *Results, runID, runtimectl string, scale float64, log io.Writer) *Runner {
	return &Runner{C: c, D: d, R: r, RunID: runID, Runtimectl: runtimectl, Scale: scale, Log: log, sessions: map[string]bool{}}
}

func (r *Runner) logf(format string, args ...any) {
	fmt.Fprintf(r.Log, "benchrun: "+format+"\n", args...)
}

// n scales a sample count, keeping at least min.
func (r *Runner) n(base, min int) int {
	v := int(math.Round(float64(base) * r.Scale))
	if v < min {
		return min
	}
	return v
}

// sessionName returns a new session name for this run.
func (r *Runner) sessionName(what string) string {
	return fmt.Sprintf("%s%s-%s-%s", SessionPrefix, r.RunID, what, NewRunID())
}

// start starts a session (a new name is made when spec.Name is empty) and registers it for
// removal.
func (r *Runner) start(ctx context.Context, spec session.Spec) (*session.Session, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("start: no name")
	}
	r.mu.Lock()
	r.sessions[spec.Name] = true
	r.mu.Unlock()
	s, _, err := r.C.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start session %s: %w", spec.Name, err)
	}
	return s, nil
}

// remove removes a session (container and volume).
func (r *Runner) remove(ctx context.Context, name string) error {
	err := r.C.Remove(ctx, name, true)
	if err == nil || strings.Contains(err.Error(), session.ErrNotFound.Error()) {
		r.mu.Lock()
		delete(r.sessions, name)
		r.mu.Unlock()
		return nil
	}
	return err
}

// Cleanup removes every session and container this run created.
func (r *Runner) Cleanup(ctx context.Context) {
	r.mu.Lock()
	names := make([]string, 0, len(r.sessions))
	for n := range r.sessions {
		names = append(names, n)
	}
	r.mu.Unlock()
	parallel(len(names), 6, func(i int) {
		if err := r.remove(ctx, names[i]); err != nil {
			r.logf("cleanup: remove session %s: %v", names[i], err)
		}
	})
	r.D.RemoveAll(ctx)
}

// Sweep removes what earlier runs that were killed left behind: sessions named rtbench-* and
// labelled containers, created more than age ago (so that a run going on at the same time is
// left alone).
func (r *Runner) Sweep(ctx context.Context, age time.Duration) {
	n := r.D.Sweep(ctx, age)
	if infos, err := r.C.List(ctx); err == nil {
		for _, in := range infos {
			if strings.HasPrefix(in.Name, SessionPrefix) && !strings.HasPrefix(in.Name, SessionPrefix+r.RunID) && time.Since(in.Created) > age {
				if r.C.Remove(ctx, in.Name, true) == nil {
					n++
				}
			}
		}
	}
	if n > 0 {
		r.logf("removed %d leftovers of earlier runs", n)
	}
}

// parallel runs f(0..n-1) with at most limit at once.
func parallel(n, limit int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}(i)
	}
	wg.Wait()
}

// exec runs code and fails unless it ends ok.
func execOK(ctx context.Context, s *session.Session, code string, o session.ExecOptions) (*session.Result, error) {
	res, err := s.Exec(ctx, code, o)
	if err != nil {
		return nil, err
	}
	if res.Status != "ok" {
		msg := string(res.Status)
		if res.Error != nil {
			msg += ": " + res.Error.Name + ": " + res.Error.Value
		}
		return res, fmt.Errorf("exec %q in %s: %s", short(code), s.Name(), msg)
	}
	return res, nil
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func secs(d time.Duration) float64 { return d.Seconds() }

// containerOf returns the container name of a session.
func containerOf(name string) string { return containers.Name(name) }
