package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

// ExecRoundTrip is pair 1: Exec of `x = 1` on a warm session through the Go library, against a
// Jupyter kernel's round trip (client in its container) and a 100-byte echo through `cat` on a
// docker exec stream.
func (r *Runner) ExecRoundTrip(ctx context.Context) error {
	s, err := r.start(ctx, session.Spec{Name: r.sessionName("rtt")})
	if err != nil {
		return err
	}
	defer s.Close()
	off, err := r.start(ctx, session.Spec{Name: r.sessionName("rtt-off"), Snapshot: "manual"})
	if err != nil {
		return err
	}
	defer off.Close()

	echoID, err := r.D.Run(ctx, ContainerSpec{Image: PythonImage, Entrypoint: []string{"sleep", "infinity"}})
	if err != nil {
		return err
	}
	es, err := r.D.Exec(ctx, echoID, []string{"cat"}, "", true)
	if err != nil {
		return err
	}
	defer es.Close()

	built, err := EnsureJupyterImage(ctx, r.D, nil)
	if err != nil {
		return err
	}
	if built {
		r.logf("built %s", JupyterImage)
	}
	jid, err := r.D.Run(ctx, ContainerSpec{Image: JupyterImage})
	if err != nil {
		return err
	}
	j, err := StartJupyter(ctx, r.D, jid)
	if err != nil {
		return err
	}
	defer j.Close()
	r.R.Add("jupyter.kernel_start", S, "lower", "informational: start of the Jupyter kernel as jupyter_client saw it (KernelManager.start_kernel to wait_for_ready)", secs(j.Start))

	msg := bytes.Repeat([]byte("e"), 100)
	back := make([]byte, 100)
	echo := func() (float64, error) {
		t := time.Now()
		if _, err := es.Write(msg); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(es, back); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	rtt := func(s *session.Session) (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	for i := 0; i < 50; i++ { // warm up
		if _, err := rtt(s); err != nil {
			return err
		}
		if _, err := rtt(off); err != nil {
			return err
		}
		if _, err := echo(); err != nil {
			return err
		}
	}
	rounds, batch := r.n(30, 3), 20
	for i := 0; i < rounds; i++ {
		for k := 0; k < batch; k++ {
			v, err := rtt(s)
			if err != nil {
				return err
			}
			r.R.Add("exec_rtt.runtimectl", Ms, "lower", "Session.Exec(`x = 1`) on a warm session through the Go library (snapshot policy every, the default), call to result", v)
		}
		for k := 0; k < batch; k++ {
			v, err := echo()
			if err != nil {
				return err
			}
			r.R.Add("exec_rtt.docker_echo", Ms, "lower", "100 bytes written to `cat` and read back on a docker exec stream (ContainerExecCreate + ContainerExecAttach, no TTY)", v)
		}
		js, err := j.RoundTrips(batch / 2)
		if err != nil {
			return err
		}
		r.R.Add("exec_rtt.jupyter", Ms, "lower", "jupyter_client execute('x = 1') to execute_reply and idle status, client and ipykernel in one container of the same image family", js...)
		for k := 0; k < batch; k++ {
			v, err := rtt(off)
			if err != nil {
				return err
			}
			r.R.Add("exec_rtt.runtimectl_snapshots_off", Ms, "lower", "informational: the same Exec on a session started with Snapshot: manual (no snapshot after each execution)", v)
		}
	}
	r.R.Compare("exec_rtt.runtimectl", "exec_rtt.jupyter", Target{"ratio", "<=", 0.05})
	r.R.Compare("exec_rtt.runtimectl", "exec_rtt.docker_echo", Target{"ratio", "<=", 2})
	r.R.Compare("exec_rtt.runtimectl_snapshots_off", "exec_rtt.docker_echo", Target{})
	return nil
}

// CLIExec is pair 2: `runtimectl session exec NAME 'x = 1'` against `docker exec C python3 -c
// 'x = 1'`, each as a whole command.
func (r *Runner) CLIExec(ctx context.Context) error {
	if _, err := os.Stat(r.Runtimectl); err != nil {
		return fmt.Errorf("%s: %w (run `make build` first)", r.Runtimectl, err)
	}
	name := r.sessionName("cli")
	s, err := r.start(ctx, session.Spec{Name: name})
	if err != nil {
		return err
	}
	s.Close() // the command opens its own stream, as it does for a user
	cid, err := r.D.Run(ctx, ContainerSpec{Image: PythonImage, Entrypoint: []string{"sleep", "infinity"}})
	if err != nil {
		return err
	}
	run := func(argv ...string) (float64, error) {
		d, err := timeCommand(ctx, argv)
		return ms(d), err
	}
	rt := []string{r.Runtimectl, "session", "exec", name, "x = 1"}
	dk := []string{"docker", "exec", cid, "python3", "-c", "x = 1"}
	for i := 0; i < 3; i++ {
		if _, err := run(rt...); err != nil {
			return err
		}
		if _, err := run(dk...); err != nil {
			return err
		}
	}
	for i, n := 0, r.n(30, 5); i < n; i++ {
		v, err := run(rt...)
		if err != nil {
			return err
		}
		r.R.Add("cli_exec.runtimectl", Ms, "lower", "`runtimectl session exec NAME 'x = 1'` as a whole command (bin/runtimectl, process start to exit)", v)
		v, err = run(dk...)
		if err != nil {
			return err
		}
		r.R.Add("cli_exec.docker_exec_python", Ms, "lower", "`docker exec C python3 -c 'x = 1'` as a whole command, C a running container of the python image", v)
	}
	r.R.Compare("cli_exec.runtimectl", "cli_exec.docker_exec_python", Target{"ratio", "<=", 0.5})
	return r.cliParts(ctx, name)
}

// cliParts measures what a `session exec` command is made of, each part by itself: the
// process (start, flag parsing, exit: `session exec --help`), then in one process, as the
// command does them, a new client's Open of the running session (the engine's version
// negotiation, the container's inspect, the exec of the relay, its attach, the agent's hello),
// the execution, and the Close.
func (r *Runner) cliParts(ctx context.Context, name string) error {
	help := []string{r.Runtimectl, "session", "exec", "--help"}
	open := func() (*session.Client, *session.Session, float64, error) {
		t := time.Now()
		de, err := docker.New("")
		if err != nil {
			return nil, nil, 0, err
		}
		c := session.NewWithEngine(de)
		s, _, err := c.Open(ctx, name)
		if err != nil {
			c.Close()
			return nil, nil, 0, err
		}
		return c, s, ms(time.Since(t)), nil
	}
	for i, n := 0, r.n(30, 5); i < n; i++ {
		d, err := timeCommand(ctx, help)
		if err != nil {
			return err
		}
		r.R.Add("cli_parts.process", Ms, "lower", "informational: `runtimectl session exec --help` as a whole command: the process's start (the binary's pages, package init), its flags and its exit, no engine", ms(d))
		c, s, v, err := open()
		if err != nil {
			return err
		}
		r.R.Add("cli_parts.open", Ms, "lower", "informational: in-process, docker.New, session.NewWithEngine and Open of a running session: API version negotiation, container inspect, exec create and attach of the relay, the agent's hello", v)
		t := time.Now()
		if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
			s.Close()
			c.Close()
			return err
		}
		r.R.Add("cli_parts.exec", Ms, "lower", "informational: in-process, the execution of `x = 1` on that fresh connection", ms(time.Since(t)))
		t = time.Now()
		s.Close()
		c.Close()
		r.R.Add("cli_parts.close", Ms, "lower", "informational: in-process, closing the connection and the client", ms(time.Since(t)))
	}
	return nil
}

// ColdStart is pair 3: a new session each time, from the Start call to the result of its first
// execution (the removal is not counted), against `docker run --rm IMG python3 -c pass`.
func (r *Runner) ColdStart(ctx context.Context) error {
	run := func(argv ...string) (float64, error) {
		d, err := timeCommand(ctx, argv)
		return secs(d), err
	}
	label := LabelBench + "=" + r.RunID
	dockerRun := []string{"docker", "run", "--rm", "--label", label, "--entrypoint", "python3", PythonImage, "-c", "pass"}
	dockerRunNone := []string{"docker", "run", "--rm", "--network", "none", "--label", label, "--entrypoint", "python3", PythonImage, "-c", "pass"}
	startOne := func() (float64, error) { return r.startToFirstResult(ctx, "cold") }
	// One of each first, not counted: page cache and the engine's caches.
	if _, err := startOne(); err != nil {
		return err
	}
	if _, err := run(dockerRun...); err != nil {
		return err
	}
	for i, n := 0, r.n(8, 3); i < n; i++ {
		v, err := startOne()
		if err != nil {
			return err
		}
		r.R.Add("cold_start.runtimectl", S, "lower", "Client.Start of a new session (image present) to the result of Exec(`x = 1`) through the Go library", v)
		v, err = run(dockerRun...)
		if err != nil {
			return err
		}
		r.R.Add("cold_start.docker_run", S, "lower", "`docker run --rm --entrypoint python3 runtimectl/python:latest -c pass` as a whole command (default bridge network)", v)
		v, err = run(dockerRunNone...)
		if err != nil {
			return err
		}
		r.R.Add("cold_start.docker_run_network_none", S, "lower", "informational: the same docker run with --network none, as sessions have", v)
	}
	r.R.Compare("cold_start.runtimectl", "cold_start.docker_run", Target{"ratio", "<=", 1.2})
	r.R.Compare("cold_start.runtimectl", "cold_start.docker_run_network_none", Target{})
	return nil
}

// startToFirstResult times Client.Start of a new session (with env, if any) to the result of
// Exec("x = 1"), then removes the session (not timed).
func (r *Runner) startToFirstResult(ctx context.Context, what string, env ...string) (float64, error) {
	return r.startToResultOf(ctx, what, "x = 1", env...)
}

// startToResultOf is startToFirstResult with code of the caller's as the first execution.
func (r *Runner) startToResultOf(ctx context.Context, what, code string, env ...string) (float64, error) {
	name := r.sessionName(what)
	t := time.Now()
	s, err := r.start(ctx, session.Spec{Name: name, Env: env})
	if err != nil {
		return 0, err
	}
	_, err = execOK(ctx, s, code, session.ExecOptions{})
	d := time.Since(t)
	s.Close()
	if rerr := r.remove(ctx, name); rerr != nil && err == nil {
		err = rerr
	}
	return secs(d), err
}

// timeCommand runs argv as a whole command and returns its wall time, process start to exit;
// the error carries the command's output.
func timeCommand(ctx context.Context, argv []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("%v: %v: %s", argv, err, out.String())
	}
	return d, nil
}
