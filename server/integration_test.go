package server_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
	"github.com/runtimectl/runtimectl/session"
)

const (
	tokA     = "alice-token-0123456789abcdef"
	tokB     = "bob-token-0123456789abcdef00"
	tokAdmin = "admin-token-0123456789abcdef"
)

func tokenFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "tokens.txt")
	require.NoError(t, os.WriteFile(p, []byte(tokA+" alice\n"+tokB+" bob\n"+tokAdmin+" ops admin\n"), 0o600))
	return p
}

// api is a small HTTP client of the server for the tests.
type api struct {
	t     *testing.T
	base  string
	token string
}

func (a api) req(method, path string, body any, hdr map[string]string) *http.Response {
	a.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(a.t, err)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.base+path, r)
	require.NoError(a.t, err)
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	return resp
}

// do sends a request and decodes a JSON reply into out (when not nil); it returns the status
// and the raw body.
func (a api) do(method, path string, body any, out any) (int, []byte) {
	a.t.Helper()
	resp := a.req(method, path, body, nil)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(a.t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode, raw
}

// result is the JSON result of an execution.
type result struct {
	Session string  `json:"session"`
	Seq     int64   `json:"seq"`
	Status  string  `json:"status"`
	Stdout  string  `json:"stdout"`
	Stderr  string  `json:"stderr"`
	Result  *string `json:"result"`
	Error   *struct {
		Name, Value, Traceback string
	} `json:"error"`
	Outputs []struct {
		Mime string `json:"mime"`
		Path string `json:"path"`
		Data []byte `json:"data"`
	} `json:"outputs"`
}

func (a api) exec(name, code string) result {
	a.t.Helper()
	var res result
	st, raw := a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": code, "timeout": 60}, &res)
	require.Equal(a.t, http.StatusOK, st, string(raw))
	return res
}

// stream runs code with Accept: application/x-ndjson and returns the events in order.
func (a api) stream(name, code string) []map[string]any {
	a.t.Helper()
	resp := a.req("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": code}, map[string]string{"Accept": server.NDJSON})
	defer resp.Body.Close()
	require.Equal(a.t, http.StatusOK, resp.StatusCode)
	require.Equal(a.t, server.NDJSON, resp.Header.Get("Content-Type"))
	var evs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev map[string]any
		require.NoError(a.t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		evs = append(evs, ev)
	}
	return evs
}

// newServer serves the API in-process on loopback with the test tokens.
func newServer(t *testing.T, c *session.Client, mod func(*server.Config)) string {
	toks, err := server.LoadTokens(tokenFile(t))
	require.NoError(t, err)
	cfg := server.Config{Client: c, Tokens: toks}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Detach()
		hs.Close()
		srv.Close()
	})
	return hs.URL
}

// startSession starts a session through the API and registers its removal first.
func startSession(t *testing.T, c *session.Client, a api, spec map[string]any) string {
	t.Helper()
	name := testenv.Name(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Remove(ctx, name, true)
	})
	if spec == nil {
		spec = map[string]any{}
	}
	spec["name"] = name
	st, raw := a.do("POST", "/v1/sessions", spec, nil)
	require.Equal(t, http.StatusCreated, st, string(raw))
	return name
}

func TestServeRoutesEndToEnd(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, map[string]any{"memory": "1g"})

	// start again: nothing to do, 200 with the session's line.
	var started map[string]any
	st, raw := a.do("POST", "/v1/sessions", map[string]any{"name": name}, &started)
	require.Equal(t, http.StatusOK, st, string(raw))
	assert.Equal(t, false, started["new"])
	assert.Equal(t, "alice", started["owner"])
	assert.Equal(t, "running", started["state"])

	r := a.exec(name, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nprint('built')\ndf.a.sum()")
	assert.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "built\n", r.Stdout)
	require.NotNil(t, r.Result)
	assert.Equal(t, "6", *r.Result)
	assert.Equal(t, int64(1), r.Seq)
	assert.Equal(t, name, r.Session)

	r = a.exec(name, "print(undefined)")
	assert.Equal(t, "error", string(r.Status))
	require.NotNil(t, r.Error)
	assert.Equal(t, "NameError", r.Error.Name)

	// Streaming: events in order, the end carrying the result.
	evs := a.stream(name, "import sys, time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.05)\nsys.stderr.write('warn\\n')\n'done'")
	var kinds []string
	var out string
	for _, ev := range evs {
		kinds = append(kinds, ev["event"].(string))
		if ev["event"] == "stdout" {
			out += ev["data"].(string)
		}
	}
	assert.Equal(t, "0\n1\n2\n", out)
	assert.Contains(t, kinds, "stderr")
	assert.Equal(t, "end", kinds[len(kinds)-1])
	assert.Equal(t, "'done'", evs[len(evs)-1]["result"])
	assert.Equal(t, "ok", evs[len(evs)-1]["status"])

	// A figure comes back with its bytes.
	r = a.exec(name, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('fig.png')")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.Len(t, r.Outputs, 1)
	assert.Equal(t, "image/png", r.Outputs[0].Mime)
	assert.True(t, bytes.HasPrefix(r.Outputs[0].Data, []byte("\x89PNG")), "the figure's bytes come with the result")

	var vars struct {
		Vars []struct{ Name, Type string } `json:"vars"`
	}
	st, raw = a.do("GET", "/v1/sessions/"+name+"/vars", nil, &vars)
	require.Equal(t, http.StatusOK, st, string(raw))
	var names []string
	for _, v := range vars.Vars {
		names = append(names, v.Name)
	}
	assert.Contains(t, names, "df")

	var ctxRep struct {
		Executions int64  `json:"executions"`
		Text       string `json:"text"`
	}
	st, raw = a.do("GET", "/v1/sessions/"+name+"/context?max_chars=500", nil, &ctxRep)
	require.Equal(t, http.StatusOK, st, string(raw))
	assert.Contains(t, ctxRep.Text, "df")
	assert.LessOrEqual(t, len(ctxRep.Text), 500)

	// History in every format.
	var hist []map[string]any
	st, raw = a.do("GET", "/v1/sessions/"+name+"/history?last=2", nil, &hist)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Len(t, hist, 2)
	assert.Equal(t, float64(4), hist[1]["seq"])
	for _, f := range []string{"text", "ipynb", "executor-json"} {
		st, raw = a.do("GET", "/v1/sessions/"+name+"/history?format="+f, nil, nil)
		assert.Equal(t, http.StatusOK, st, f)
		assert.Contains(t, string(raw), "DataFrame", f)
	}
	st, _ = a.do("GET", "/v1/sessions/"+name+"/history?format=yaml", nil, nil)
	assert.Equal(t, http.StatusBadRequest, st)

	// Snapshots: take one, change state, restore it.
	var snap struct {
		ID   string   `json:"id"`
		Kept []string `json:"kept"`
	}
	st, raw = a.do("POST", "/v1/sessions/"+name+"/snapshots", nil, &snap)
	require.Equal(t, http.StatusOK, st, string(raw))
	assert.Contains(t, snap.Kept, "df")
	a.exec(name, "later = 1")
	var snaps []map[string]any
	st, _ = a.do("GET", "/v1/sessions/"+name+"/snapshots", nil, &snaps)
	require.Equal(t, http.StatusOK, st)
	require.NotEmpty(t, snaps)
	st, raw = a.do("POST", "/v1/sessions/"+name+"/restore", map[string]string{"snapshot": snap.ID}, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	r = a.exec(name, "'later' in globals()")
	assert.Equal(t, "False", *r.Result)

	// interrupt with nothing running.
	var intr map[string]bool
	st, _ = a.do("POST", "/v1/sessions/"+name+"/interrupt", nil, &intr)
	require.Equal(t, http.StatusOK, st)
	assert.False(t, intr["interrupted"])

	// Files: one file in and out, a folder as a tar both ways.
	st, raw = a.do("PUT", "/v1/sessions/"+name+"/files/data.csv", []byte("a,b\n1,2\n"), nil)
	require.Equal(t, http.StatusNoContent, st, string(raw))
	r = a.exec(name, "open('data.csv').read()")
	assert.Equal(t, `'a,b\n1,2\n'`, *r.Result)
	st, raw = a.do("GET", "/v1/sessions/"+name+"/files/fig.png", nil, nil)
	require.Equal(t, http.StatusOK, st)
	assert.True(t, bytes.HasPrefix(raw, []byte("\x89PNG")))
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, f := range []struct{ name, body string }{{"in/a.txt", "A"}, {"in/sub/b.txt", "B"}} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}))
		_, _ = tw.Write([]byte(f.body))
	}
	require.NoError(t, tw.Close())
	resp := a.req("PUT", "/v1/sessions/"+name+"/files/up", tb.Bytes(), map[string]string{"Content-Type": server.TarType})
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	r = a.exec(name, "open('up/in/sub/b.txt').read()")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "'B'", *r.Result)
	resp = a.req("GET", "/v1/sessions/"+name+"/files/up", nil, nil)
	require.Equal(t, server.TarType, resp.Header.Get("Content-Type"))
	got := map[string]string{}
	tr := tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeReg {
			got[h.Name] = string(b)
		}
	}
	resp.Body.Close()
	assert.Equal(t, map[string]string{"up/in/a.txt": "A", "up/in/sub/b.txt": "B"}, got)
	st, raw = a.do("GET", "/v1/sessions/"+name+"/files/../etc/passwd", nil, nil)
	assert.NotEqual(t, http.StatusOK, st, string(raw))
	st, raw = a.do("GET", "/v1/sessions/"+name+"/files/.runtimectl/history.jsonl", nil, nil)
	assert.Equal(t, http.StatusBadRequest, st, string(raw))

	// fork, then ls shows both, owned by alice.
	fork := name + "-f"
	t.Cleanup(func() { _ = c.Remove(context.Background(), fork, true) })
	st, raw = a.do("POST", "/v1/sessions/"+name+"/fork", map[string]string{"name": fork}, nil)
	require.Equal(t, http.StatusCreated, st, string(raw))
	r = a.exec(fork, "int(df.a.sum())")
	assert.Equal(t, "6", *r.Result)
	var list []map[string]any
	st, _ = a.do("GET", "/v1/sessions", nil, &list)
	require.Equal(t, http.StatusOK, st)
	owned := map[string]any{}
	for _, in := range list {
		owned[in["name"].(string)] = in["owner"]
	}
	assert.Equal(t, "alice", owned[name])
	assert.Equal(t, "alice", owned[fork])

	// stop, then exec brings it back with its state.
	var info map[string]any
	st, raw = a.do("POST", "/v1/sessions/"+name+"/stop", nil, &info)
	require.Equal(t, http.StatusOK, st, string(raw))
	assert.Equal(t, "exited", info["state"])
	r = a.exec(name, "int(df.a.sum())")
	assert.Equal(t, "6", *r.Result)

	// rm of a running session without force is a 409; with export, the files come back.
	st, _ = a.do("DELETE", "/v1/sessions/"+name, nil, nil)
	assert.Equal(t, http.StatusConflict, st)
	resp = a.req("DELETE", "/v1/sessions/"+name+"?force=true&keep=*.csv&keep_history=true", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	exported := map[string]bool{}
	tr = tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		exported[h.Name] = true
	}
	resp.Body.Close()
	assert.True(t, exported["data.csv"], "%v", exported)
	assert.True(t, exported["history.json"], "%v", exported)
	st, _ = a.do("GET", "/v1/sessions/"+name, nil, nil)
	assert.Equal(t, http.StatusNotFound, st)
}

func TestATokenCannotSeeAnotherTokensSessions(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	alice := api{t: t, base: base, token: tokA}
	bob := api{t: t, base: base, token: tokB}
	admin := api{t: t, base: base, token: tokAdmin}
	name := startSession(t, c, alice, nil)
	alice.exec(name, "secret = 42")

	var list []map[string]any
	bob.do("GET", "/v1/sessions", nil, &list)
	for _, in := range list {
		assert.NotEqual(t, name, in["name"], "bob's list does not show alice's session")
	}
	missing := "no-such-" + name
	for _, c := range []struct{ method, path string }{
		{"GET", ""}, {"POST", "/exec"}, {"POST", "/interrupt"}, {"POST", "/stop"}, {"GET", "/history"},
		{"GET", "/snapshots"}, {"POST", "/snapshots"}, {"GET", "/vars"}, {"GET", "/context"},
		{"GET", "/files/x"}, {"PUT", "/files/x"}, {"DELETE", "?force=true"}, {"POST", "/fork"}, {"POST", "/restore"},
	} {
		body := any(nil)
		switch c.path {
		case "/exec":
			body = map[string]string{"code": "secret"}
		case "/fork":
			body = map[string]string{"name": name + "-stolen"}
		case "/restore":
			body = map[string]string{"snapshot": "1-x"}
		case "/files/x":
			if c.method == "PUT" {
				body = []byte("x")
			}
		}
		st, raw := bob.do(c.method, "/v1/sessions/"+name+c.path, body, nil)
		assert.Equal(t, http.StatusNotFound, st, "%s %s: %s", c.method, c.path, raw)
		_, rawMissing := bob.do(c.method, "/v1/sessions/"+missing+c.path, body, nil)
		assert.Equal(t, strings.ReplaceAll(string(rawMissing), missing, "NAME"), strings.ReplaceAll(string(raw), name, "NAME"),
			"another token's session reads exactly like a missing one")
	}
	st, raw := bob.do("POST", "/v1/sessions", map[string]string{"name": name}, nil)
	assert.Equal(t, http.StatusConflict, st, "bob cannot take alice's name")
	assert.Contains(t, string(raw), "is in use on this server (names are shared by every token)")
	assert.NotContains(t, string(raw), "alice")

	// the admin sees and uses it.
	r := admin.exec(name, "secret")
	assert.Equal(t, "42", *r.Result)
	list = nil
	admin.do("GET", "/v1/sessions", nil, &list)
	found := false
	for _, in := range list {
		found = found || in["name"] == name
	}
	assert.True(t, found)

	// alice's session is still alice's and still running.
	r = alice.exec(name, "secret + 1")
	assert.Equal(t, "43", *r.Result)
	ci, err := docker.From(c).Containers().Inspect(context.Background(), name)
	require.NoError(t, err)
	assert.Equal(t, "alice", ci.Labels["io.runtimectl.owner"], "the container is labelled with its owner")
}

func TestExecutionsPastTheTokensCapAre429(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, func(cfg *server.Config) { cfg.MaxExecs = 1 })
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	resp := a.req("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": "import time\nprint('go', flush=True)\ntime.sleep(3)"}, map[string]string{"Accept": server.NDJSON})
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "go", "the first execution runs")
	st, raw := a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": "1"}, nil)
	assert.Equal(t, http.StatusTooManyRequests, st)
	assert.Contains(t, string(raw), "wait for one to end")
	// Another token has its own cap.
	other := startSession(t, c, api{t: t, base: base, token: tokB}, nil)
	r := api{t: t, base: base, token: tokB}.exec(other, "1 + 1")
	assert.Equal(t, "2", *r.Result)
}

func TestMetricsCountExecutions(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	a.exec(name, "print('x' * 1000)")
	a.exec(name, "1/0")
	st, raw := a.do("GET", "/metrics", nil, nil)
	assert.Equal(t, http.StatusForbidden, st, "metrics cover every token: admin only")
	assert.Contains(t, string(raw), "needs an admin token")
	st, raw = api{t: t, base: base, token: tokAdmin}.do("GET", "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, st)
	m := string(raw)
	assert.Contains(t, m, `runtimectl_executions_total{status="ok"} 1`)
	assert.Contains(t, m, `runtimectl_executions_total{status="error"} 1`)
	assert.Contains(t, m, "runtimectl_exec_duration_seconds_count 2")
	assert.Contains(t, m, `runtimectl_sessions{state="running"}`)
	assert.Regexp(t, `runtimectl_streamed_bytes_total\{stream="stdout"\} 100[0-9]`, m)
	st, _ = a.do("GET", "/healthz", nil, nil)
	assert.Equal(t, http.StatusOK, st)
	var doc map[string]any
	st, _ = api{t: t, base: base}.do("GET", "/openapi.json", nil, &doc)
	assert.Equal(t, http.StatusOK, st)
	assert.Contains(t, doc, "paths")
}

func TestUploadsOverTheLimitAre413(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, func(cfg *server.Config) { cfg.MaxUpload = 1000 })
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	st, raw := a.do("PUT", "/v1/sessions/"+name+"/files/big.bin", bytes.Repeat([]byte("x"), 5000), nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, st, string(raw))
	r := a.exec(name, "import os; os.path.exists('big.bin')")
	assert.Equal(t, "False", *r.Result)
	_ = fmt.Sprint()
}

func execOpts() session.ExecOptions { return session.ExecOptions{Timeout: time.Minute} }

// A client that stops reading is cut off after the write timeout; its execution runs to its
// end in the session and lands in the history, and the session serves the next request.
func TestASlowClientIsCutOffAndTheExecutionLands(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, func(cfg *server.Config) { cfg.WriteTimeout = time.Second; cfg.MaxOutput = 128 << 20 })
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	code := "import sys\nfor _ in range(64):\n    sys.stdout.write('x' * (1 << 20))\nflooded = True"
	resp := a.req("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": code, "max_output": "80m"}, map[string]string{"Accept": server.NDJSON})
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// Read nothing until the server has given up on this client.
	ctx := testenv.Ctx(t, 2*time.Minute)
	var landed bool
	for i := 0; i < 120 && !landed; i++ {
		execs, _, err := c.History(ctx, name)
		require.NoError(t, err)
		for _, e := range execs {
			landed = landed || (strings.Contains(e.Code, "flooded = True") && e.Status == "ok")
		}
		if !landed {
			time.Sleep(500 * time.Millisecond)
		}
	}
	require.True(t, landed, "the execution ran to its end in the session")
	evs, _ := events(bufio.NewReader(resp.Body))
	if len(evs) > 0 {
		assert.NotEqual(t, "end", evs[len(evs)-1]["event"], "the slow client's stream was cut before the end")
	}
	r := a.exec(name, "flooded")
	assert.Equal(t, "True", *r.Result)
	st, raw := api{t: t, base: base, token: tokAdmin}.do("GET", "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, st)
	assert.Contains(t, string(raw), `runtimectl_executions_total{status="detached"} 1`)
}
