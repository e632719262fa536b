package bench

import (
	"context"
	"io"
	"time"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/session"
)

// BashImage is the bash session image, and the image of its bare baseline (its tag follows
// RUNTIMECTL_IMAGE_TAG, as PythonImage's does).
var BashImage = "runtimectl/bash:" + images.Tag()

// BashRoundTrip is pair 10: Exec of `x=1` on a warm bash session through the Go library (an
// execution that changes nothing, so no snapshot follows it), and of `i=$((i+1))` (which changes
// the state, so a snapshot follows each), against a docker exec of `bash -c 'x=1'` (create,
// attach, run to its end) in a running container of the same image.
func (r *Runner) BashRoundTrip(ctx context.Context) error {
	s, err := r.start(ctx, session.Spec{Name: r.sessionName("bash"), Lang: "bash"})
	if err != nil {
		return err
	}
	defer s.Close()
	cid, err := r.D.Run(ctx, ContainerSpec{Image: BashImage, Entrypoint: []string{"sleep", "infinity"}})
	if err != nil {
		return err
	}
	rtt := func(code string) (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, s, code, session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	dockerExec := func() (float64, error) {
		t := time.Now()
		es, err := r.D.Exec(ctx, cid, []string{"bash", "-c", "x=1"}, "", false)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, es)
		es.Close()
		return ms(time.Since(t)), err
	}
	if _, err := rtt("i=0"); err != nil {
		return err
	}
	for i := 0; i < 20; i++ { // warm up
		for _, f := range []func() (float64, error){func() (float64, error) { return rtt("x=1") }, func() (float64, error) { return rtt("i=$((i+1))") }, dockerExec} {
			if _, err := f(); err != nil {
				return err
			}
		}
	}
	rounds, batch := r.n(20, 3), 10
	for i := 0; i < rounds; i++ {
		for k := 0; k < batch; k++ {
			v, err := rtt("x=1")
			if err != nil {
				return err
			}
			r.R.Add("bash_rtt.runtimectl", Ms, "lower", "Session.Exec(`x=1`) on a warm bash session through the Go library: the state does not change, no snapshot follows", v)
		}
		for k := 0; k < batch; k++ {
			v, err := rtt("i=$((i+1))")
			if err != nil {
				return err
			}
			r.R.Add("bash_rtt.runtimectl_changing", Ms, "lower", "informational: Session.Exec(`i=$((i+1))`) on the same session: the state changes, a snapshot follows each", v)
		}
		for k := 0; k < batch; k++ {
			v, err := dockerExec()
			if err != nil {
				return err
			}
			r.R.Add("bash_rtt.docker_exec_bash", Ms, "lower", "docker exec of `bash -c 'x=1'` in a running container of the bash image: ContainerExecCreate, ContainerExecAttach, read to its end", v)
		}
	}
	r.R.Bound("bash_rtt.runtimectl", Target{"value", "<=", 2})
	r.R.Compare("bash_rtt.runtimectl", "bash_rtt.docker_exec_bash", Target{})
	r.R.Compare("bash_rtt.runtimectl_changing", "bash_rtt.docker_exec_bash", Target{})
	return nil
}
