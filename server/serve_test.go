package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// runtimectlBinary builds bin/runtimectl of this tree once per test binary.
func runtimectlBinary(t *testing.T) string {
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "runtimectl-serve-test-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "runtimectl")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/runtimectl").CombinedOutput()
		if err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	require.NoError(t, binErr, binPath)
	return binPath
}

// serveProc is `runtimectl serve` running as its own process.
type serveProc struct {
	cmd    *exec.Cmd
	base   string
	stderr *strings.Builder
	mu     *sync.Mutex
	done   chan error
}

func startServe(t *testing.T, tokens string, extra ...string) *serveProc {
	t.Helper()
	bin := runtimectlBinary(t)
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokens}, extra...)...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &serveProc{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		re := regexp.MustCompile(`serving on ((?:https?|unix)://\S+)`)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	select {
	case p.base = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatalf("runtimectl serve did not say where it serves: %s", p.log())
	}
	return p
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *serveProc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(d):
		t.Fatalf("runtimectl serve did not end within %s: %s", d, p.log())
	}
	return nil
}

// openStream starts a streamed execution and returns a reader past the events that carry
// "started" (the output may come in several chunks).
func openStream(t *testing.T, a api, name, code string) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp := a.req("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": code}, map[string]string{"Accept": server.NDJSON})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	var stdout string
	for !strings.Contains(stdout, "started") {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "the stream ended before 'started': %q", stdout)
		var ev struct{ Event, Data string }
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		if ev.Event == "stdout" {
			stdout += ev.Data
		}
	}
	return resp, br
}

func events(br *bufio.Reader) ([]map[string]any, error) {
	var evs []map[string]any
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var ev map[string]any
			if json.Unmarshal(line, &ev) == nil {
				evs = append(evs, ev)
			}
		}
		if err != nil {
			return evs, err
		}
	}
}

func TestSIGTERMStopsAcceptingAndLetsRunningRequestsFinish(t *testing.T) {
	c := testenv.Client(t)
	p := startServe(t, tokenFile(t), "--grace", "60s")
	a := api{t: t, base: p.base, token: tokA}
	name := startSession(t, c, a, nil)
	resp, br := openStream(t, a, name, "import time\nprint('started', flush=True)\ntime.sleep(3)\nprint('finished')")
	defer resp.Body.Close()

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	// New connections are refused while the running request goes on.
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		_, err := http.Get(p.base + "/healthz")
		refused = err != nil
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, refused, "the server stops accepting at once")
	evs, _ := events(br)
	require.NotEmpty(t, evs)
	end := evs[len(evs)-1]
	assert.Equal(t, "end", end["event"], "%v", evs)
	assert.Equal(t, "ok", end["status"])
	var out string
	for _, ev := range evs {
		if ev["event"] == "stdout" {
			out += ev["data"].(string)
		}
	}
	assert.Contains(t, out, "finished", "the output came as events (the end event does not repeat it)")
	assert.NoError(t, p.wait(t, 30*time.Second), p.log())
	assert.Contains(t, p.log(), "stopped")
}

func TestAStreamCutByShutdownStillLandsInTheHistory(t *testing.T) {
	c := testenv.Client(t)
	p := startServe(t, tokenFile(t), "--grace", "1s")
	a := api{t: t, base: p.base, token: tokA}
	name := startSession(t, c, a, nil)
	resp, br := openStream(t, a, name, "import time\nprint('started', flush=True)\ntime.sleep(4)\nlanded = 'yes'\nprint('after')")
	defer resp.Body.Close()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	evs, _ := events(br)
	require.NotEmpty(t, evs, "the client is told")
	last := evs[len(evs)-1]
	assert.Equal(t, "fail", last["event"], "%v", evs)
	assert.Equal(t, "detached", last["code"])
	assert.Contains(t, last["error"], "lands in its history")
	require.NoError(t, p.wait(t, 30*time.Second), p.log())

	// The execution ran to its end in the session and is in the history.
	ctx := testenv.Ctx(t, time.Minute)
	var found bool
	for i := 0; i < 60 && !found; i++ {
		execs, _, err := c.History(ctx, name)
		require.NoError(t, err)
		for _, e := range execs {
			if strings.Contains(e.Code, "landed = 'yes'") && e.Status == "ok" {
				found = true
				assert.Contains(t, e.Stdout, "after")
			}
		}
		if !found {
			time.Sleep(500 * time.Millisecond)
		}
	}
	assert.True(t, found, "the cut execution is in the history with status ok")
	s, _, err := c.Open(ctx, name)
	require.NoError(t, err)
	defer s.Close()
	res, err := s.Exec(ctx, "landed", execOpts())
	require.NoError(t, err)
	assert.Equal(t, "'yes'", *res.Result)
}

func TestRestartingTheServerMidwayLosesNothing(t *testing.T) {
	c := testenv.Client(t)
	tokens := tokenFile(t)
	p := startServe(t, tokens)
	a := api{t: t, base: p.base, token: tokA}
	name := startSession(t, c, a, nil)
	a.exec(name, "a = 1")
	resp, _ := openStream(t, a, name, "import time\nprint('started', flush=True)\ntime.sleep(3)\nb = 2")
	// The server dies hard in the middle of the execution.
	require.NoError(t, p.cmd.Process.Kill())
	resp.Body.Close()
	_ = p.wait(t, 30*time.Second)

	p2 := startServe(t, tokens)
	a2 := api{t: t, base: p2.base, token: tokA}
	var info map[string]any
	st, raw := a2.do("GET", "/v1/sessions/"+name, nil, &info)
	require.Equal(t, http.StatusOK, st, string(raw))
	assert.Equal(t, "alice", info["owner"])
	r := a2.exec(name, "a + b") // queued behind the running one in the session
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "3", *r.Result)
	var hist []map[string]any
	a2.do("GET", "/v1/sessions/"+name+"/history", nil, &hist)
	var codes []string
	for _, h := range hist {
		codes = append(codes, h["code"].(string))
	}
	require.Len(t, codes, 3, "%v", codes)
	assert.Contains(t, codes[1], "b = 2")
	st, _ = api{t: t, base: p2.base, token: tokB}.do("GET", "/v1/sessions/"+name, nil, nil)
	assert.Equal(t, http.StatusNotFound, st, "ownership survives the restart")
	_ = context.Background
}

// SIGHUP reads the token file again: a token added to it is let in, one taken out is not, and
// the server goes on serving.
func TestSIGHUPReadsTheTokenFileAgain(t *testing.T) {
	testenv.Client(t)
	tokens := tokenFile(t)
	p := startServe(t, tokens)
	const tokNew = "carol-token-0123456789abcdef"
	carol, bob := api{t: t, base: p.base, token: tokNew}, api{t: t, base: p.base, token: tokB}
	st, _ := carol.do("GET", "/v1/sessions", nil, nil)
	require.Equal(t, http.StatusUnauthorized, st, "not in the file yet")
	st, _ = bob.do("GET", "/v1/sessions", nil, nil)
	require.Equal(t, http.StatusOK, st)

	require.NoError(t, os.WriteFile(tokens, []byte(tokA+" alice\n"+tokNew+" carol\n"), 0o600))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		st, _ := carol.do("GET", "/v1/sessions", nil, nil)
		return st == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the new token is let in after SIGHUP")
	st, _ = bob.do("GET", "/v1/sessions", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, st, "a token taken out of the file is refused")
}
