package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// pythonDriver runs on the host with the Python client of clients/python: it starts a session
// through `runtimectl serve`, warms it up, prints "ready", then for each line N on stdin prints
// a JSON list of N round trips of run("x = 1") in seconds, and stops on "q" or EOF.
const pythonDriver = `
import json, os, sys, time
from runtimectl import Client
c = Client()
s = c.start(os.environ["BENCH_SESSION"])
for _ in range(50):
    assert s.run("x = 1").status == "ok"
print("ready", flush=True)
def once():
    t = time.perf_counter()
    r = s.run("x = 1")
    d = time.perf_counter() - t
    assert r.status == "ok", r
    return d
for line in sys.stdin:
    line = line.strip()
    if not line or line == "q":
        break
    print(json.dumps([once() for _ in range(int(line))]), flush=True)
`

// PythonClient is the Python client's run("x = 1") over `runtimectl serve` on loopback, beside
// the Go library's Exec and a Jupyter kernel's round trip from jupyter_client.
func (r *Runner) PythonClient(ctx context.Context) error {
	s, err := r.start(ctx, session.Spec{Name: r.sessionName("rtt-go")})
	if err != nil {
		return err
	}
	defer s.Close()

	dir, err := os.MkdirTemp("", "runtimectl-bench-serve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	tokens := filepath.Join(dir, "tokens.txt")
	if err := os.WriteFile(tokens, []byte(token+" bench\n"), 0o600); err != nil {
		return err
	}
	srv := exec.CommandContext(ctx, r.Runtimectl, "serve", "--listen", "127.0.0.1:0", "--token-file", tokens)
	errPipe, err := srv.StderrPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start %s serve: %w", r.Runtimectl, err)
	}
	defer func() { _ = srv.Process.Signal(os.Interrupt); _ = srv.Wait() }()
	sc := bufio.NewScanner(errPipe)
	re := regexp.MustCompile(`serving on (http://\S+)`)
	url := ""
	for url == "" && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		return fmt.Errorf("runtimectl serve did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()

	name := r.sessionName("rtt-py")
	r.mu.Lock()
	r.sessions[name] = true
	r.mu.Unlock()
	py := exec.CommandContext(ctx, "python3", "-u", "-c", pythonDriver)
	py.Env = append(os.Environ(), "RUNTIMECTL_URL="+url, "RUNTIMECTL_TOKEN="+token, "BENCH_SESSION="+name,
		"PYTHONPATH="+filepath.Join(filepath.Dir(filepath.Dir(r.Runtimectl)), "clients", "python"))
	var pyErr strings.Builder
	py.Stderr = &pyErr
	in, err := py.StdinPipe()
	if err != nil {
		return err
	}
	outPipe, err := py.StdoutPipe()
	if err != nil {
		return err
	}
	if err := py.Start(); err != nil {
		return err
	}
	defer func() { _, _ = io.WriteString(in, "q\n"); in.Close(); _ = py.Wait() }()
	out := bufio.NewReader(outPipe)
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		return fmt.Errorf("python driver: %q %v (stderr: %s)", line, err, lastLines(pyErr.String(), 5))
	}
	pyRounds := func(n int) ([]float64, error) {
		if _, err := fmt.Fprintf(in, "%d\n", n); err != nil {
			return nil, err
		}
		line, err := out.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("python driver: %v (stderr: %s)", err, lastLines(pyErr.String(), 5))
		}
		var secs []float64
		if err := json.Unmarshal([]byte(line), &secs); err != nil {
			return nil, fmt.Errorf("python driver said %q", line)
		}
		for i := range secs {
			secs[i] *= 1000
		}
		return secs, nil
	}

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

	rtt := func() (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, s, "x = 1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	for i := 0; i < 50; i++ {
		if _, err := rtt(); err != nil {
			return err
		}
	}
	rounds, batch := r.n(30, 3), 20
	for i := 0; i < rounds; i++ {
		vs, err := pyRounds(batch)
		if err != nil {
			return err
		}
		r.R.Add("exec_rtt.python_client", Ms, "lower", "Python client (clients/python, standard library) Session.run(\"x = 1\") over `runtimectl serve` on loopback, streamed NDJSON, call to result", vs...)
		for k := 0; k < batch; k++ {
			v, err := rtt()
			if err != nil {
				return err
			}
			r.R.Add("exec_rtt.go_library_beside_python", Ms, "lower", "informational: Session.Exec(`x = 1`) through the Go library, interleaved with the Python client's", v)
		}
		js, err := j.RoundTrips(batch / 2)
		if err != nil {
			return err
		}
		r.R.Add("exec_rtt.jupyter_beside_python", Ms, "lower", "jupyter_client execute('x = 1') to execute_reply and idle status, interleaved with the Python client's", js...)
	}
	r.R.Compare("exec_rtt.python_client", "exec_rtt.jupyter_beside_python", Target{"ratio", "<=", 1.0 / 3})
	r.R.Compare("exec_rtt.python_client", "exec_rtt.go_library_beside_python", Target{})
	return nil
}
