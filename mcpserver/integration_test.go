package mcpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/mcpserver"
	"github.com/runtimectl/runtimectl/session"
)

// realConfig is a Server on the engine whose default session is named after the test; it,
// its bash sibling and the sessions named after it with the suffixes given are removed at the
// end of the test.
func realConfig(t *testing.T, suffixes ...string) (mcpserver.Config, *session.Client) {
	t.Helper()
	c := testenv.Client(t)
	name := testenv.Name(t)
	t.Cleanup(func() {
		for _, suffix := range append([]string{"", "-bash"}, suffixes...) {
			_ = c.Remove(context.Background(), name+suffix, true)
		}
	})
	return mcpserver.Config{Client: c, Spec: session.Spec{Name: name, TestRun: session.TestRunID()}}, c
}

func run(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, mcpserver.Execution) {
	t.Helper()
	res := call(t, cs, "run_code", args)
	var e mcpserver.Execution
	structured(t, res, &e)
	return res, e
}

func TestRunCodeKeepsTheStateBetweenCallsAndReturnsTheExecution(t *testing.T) {
	cfg, _ := realConfig(t)
	cfg.OutputBudget = 200
	_, cs := connect(t, cfg, nil)
	name := cfg.Spec.Name

	res, e := run(t, cs, map[string]any{"code": "x = 40 + 2\nx"})
	assert.Equal(t, name, e.Session, "the connection's session, created on first use")
	assert.Equal(t, "ok", e.Status)
	require.NotNil(t, e.Result)
	assert.Equal(t, "42", *e.Result)
	assert.Equal(t, int64(1), e.Seq)
	assert.Contains(t, text(res), "result: 42")
	assert.Contains(t, text(res), "session "+name+", execution 1: ok")

	_, e = run(t, cs, map[string]any{"code": "print(x * 2)"})
	assert.Equal(t, "84\n", e.Stdout, "the state is kept between calls")

	res, e = run(t, cs, map[string]any{"code": "y = 1\nraise ValueError('bad value')"})
	assert.False(t, res.IsError, "code that raised is a result, not a tool error")
	assert.Equal(t, "error", e.Status)
	require.NotNil(t, e.Error)
	assert.Equal(t, "ValueError", e.Error.Name)
	assert.Contains(t, e.Stderr, "ValueError: bad value")
	assert.Contains(t, text(res), "ValueError: bad value")

	_, e = run(t, cs, map[string]any{"code": "import time; time.sleep(30)", "timeout": 0.5})
	assert.Equal(t, "timeout", e.Status)
	_, e = run(t, cs, map[string]any{"code": "x + y"})
	require.NotNil(t, e.Result)
	assert.Equal(t, "43", *e.Result, "a timeout keeps the state")

	res, e = run(t, cs, map[string]any{"code": "print('a' * 1000 + 'END')"})
	assert.Equal(t, 1004-200, e.StdoutCut)
	assert.True(t, strings.HasSuffix(e.Stdout, "END\n"))
	assert.Contains(t, text(res), "runtimectl cut 804 characters of stdout from the middle")

	// Another language without a session: this connection's session in that language.
	_, e = run(t, cs, map[string]any{"code": "A=5; echo $((A * 2))", "language": "bash"})
	assert.Equal(t, name+"-bash", e.Session)
	assert.Equal(t, "10\n", e.Stdout)
	_, e = run(t, cs, map[string]any{"code": "echo $A", "language": "bash"})
	assert.Equal(t, "5\n", e.Stdout)

	res = call(t, cs, "run_code", map[string]any{"code": "1", "session": name, "language": "bash"})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "is a python session, not bash")
	res = call(t, cs, "run_code", map[string]any{"code": "1", "session": "no-such-session-here"})
	assert.True(t, res.IsError)
	assert.Equal(t, `no such session "no-such-session-here": start it with start_session, or see list_sessions`+"\n", text(res))
}

func TestFilesVariablesContextSnapshotsAndForks(t *testing.T) {
	cfg, _ := realConfig(t, "-fork")
	fork := cfg.Spec.Name + "-fork"
	_, cs := connect(t, cfg, nil)
	name := cfg.Spec.Name

	var w struct {
		Session, Path string
		Size          int64
	}
	structured(t, call(t, cs, "write_file", map[string]any{"path": "data/sales.csv", "content": "region,amount\neu,3\nus,4\n"}), &w)
	assert.Equal(t, name, w.Session)
	assert.Equal(t, "/workspace/data/sales.csv", w.Path)
	assert.Equal(t, int64(24), w.Size)
	structured(t, call(t, cs, "write_file", map[string]any{"path": "blob.bin", "content": "AAEC/w==", "encoding": "base64"}), &w)
	assert.Equal(t, int64(4), w.Size)

	_, e := run(t, cs, map[string]any{"code": "import csv\nrows = list(csv.DictReader(open('data/sales.csv')))\ntotal = sum(int(r['amount']) for r in rows)\nopen('report.txt', 'w').write('total ' + str(total) + '\\n' + 'é' * 10)\ntotal"})
	require.NotNil(t, e.Result)
	assert.Equal(t, "7", *e.Result, "code reads what write_file wrote")

	res := call(t, cs, "read_file", map[string]any{"path": "report.txt"})
	assert.Equal(t, "total 7\n"+strings.Repeat("é", 10)+"\n", text(res))
	var r struct {
		Size, Returned, Offset int64
		More                   bool
		Mime                   string
	}
	structured(t, res, &r)
	assert.Equal(t, int64(28), r.Size)
	assert.False(t, r.More)
	res = call(t, cs, "read_file", map[string]any{"path": "report.txt", "offset": 6, "max_bytes": 5})
	structured(t, res, &r)
	assert.True(t, r.More)
	assert.Equal(t, int64(4), r.Returned, "a read that would split a character stops before it")
	assert.True(t, strings.HasPrefix(text(res), "7\né\n[... 18 more bytes: read on with offset 10 "), text(res))
	res = call(t, cs, "read_file", map[string]any{"path": "blob.bin"})
	require.False(t, res.IsError, text(res))
	require.Len(t, res.Content, 1)
	blob, ok := res.Content[0].(*mcp.EmbeddedResource)
	require.True(t, ok, "binary content is a resource")
	assert.Equal(t, []byte{0, 1, 2, 255}, blob.Resource.Blob)
	res = call(t, cs, "read_file", map[string]any{"path": "nothing-here.txt"})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "nothing-here.txt")

	var files struct {
		Files []struct{ Path string }
		Total int
	}
	res = call(t, cs, "list_files", map[string]any{"path": "data"})
	structured(t, res, &files)
	require.Len(t, files.Files, 1)
	assert.Equal(t, "data/sales.csv", files.Files[0].Path)
	assert.GreaterOrEqual(t, files.Total, 3)
	assert.Contains(t, text(res), "data/sales.csv")

	var vars struct {
		Vars    []struct{ Name, Type string }
		Modules []string
	}
	structured(t, call(t, cs, "list_variables", nil), &vars)
	var names []string
	for _, v := range vars.Vars {
		names = append(names, v.Name)
	}
	assert.Contains(t, names, "total")
	assert.Contains(t, names, "rows")
	assert.Contains(t, vars.Modules, "csv")

	res = call(t, cs, "session_context", map[string]any{"max_chars": 2000})
	require.False(t, res.IsError, text(res))
	assert.Contains(t, text(res), "Session "+name)
	assert.Contains(t, text(res), "total")
	assert.LessOrEqual(t, len(text(res)), 2001)

	var snaps struct {
		Snapshots []struct {
			ID   string
			Seq  int64
			Kept []string
		}
	}
	structured(t, call(t, cs, "list_snapshots", nil), &snaps)
	require.NotEmpty(t, snaps.Snapshots)
	last := snaps.Snapshots[len(snaps.Snapshots)-1]
	assert.Contains(t, last.Kept, "total")

	_, e = run(t, cs, map[string]any{"code": "total = 0\nextra = 1"})
	assert.Equal(t, "ok", e.Status)
	var restored struct {
		Snapshot string
		Restored []string
	}
	structured(t, call(t, cs, "restore_snapshot", map[string]any{"snapshot": last.ID}), &restored)
	assert.Equal(t, last.ID, restored.Snapshot)
	_, e = run(t, cs, map[string]any{"code": "(total, 'extra' in globals())"})
	require.NotNil(t, e.Result)
	assert.Equal(t, "(7, False)", *e.Result, "the namespace is the snapshot's")
	res = call(t, cs, "restore_snapshot", map[string]any{"snapshot": "9-nosuch"})
	assert.True(t, res.IsError)

	var info mcpserver.SessionInfo
	structured(t, call(t, cs, "fork_session", map[string]any{"name": fork}), &info)
	assert.Equal(t, fork, info.Name)
	assert.True(t, info.New)
	_, e = run(t, cs, map[string]any{"code": "total + 1", "session": fork})
	require.NotNil(t, e.Result)
	assert.Equal(t, "8", *e.Result, "the fork has the state")
	res = call(t, cs, "read_file", map[string]any{"path": "data/sales.csv", "session": fork})
	assert.Contains(t, text(res), "eu,3", "and the files")
	_, e = run(t, cs, map[string]any{"code": "total"})
	assert.Equal(t, "7", *e.Result, "the original is untouched")
	res = call(t, cs, "fork_session", map[string]any{"name": fork})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "exists already")
}

// listChanged counts resource list-changed notifications.
type listChanged struct {
	mu sync.Mutex
	n  int
}

func (l *listChanged) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *listChanged) waitPast(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return l.count() > n }, time.Minute, 50*time.Millisecond, "a resources/list_changed notification")
}

func resourceURIs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var uris []string
	for r, err := range cs.Resources(context.Background(), nil) {
		require.NoError(t, err)
		uris = append(uris, r.URI)
	}
	return uris
}

func TestSessionsComeAndGoWithTheirResources(t *testing.T) {
	cfg, c := realConfig(t, "-sh")
	other := cfg.Spec.Name + "-sh"
	changes := &listChanged{}
	_, cs := connect(t, cfg, &mcp.ClientOptions{ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
		changes.mu.Lock()
		changes.n++
		changes.mu.Unlock()
	}})

	seen := changes.count()
	var info mcpserver.SessionInfo
	structured(t, call(t, cs, "start_session", map[string]any{"name": other, "language": "bash"}), &info)
	assert.Equal(t, mcpserver.SessionInfo{Name: other, Lang: "bash", State: "running", Executions: 0, New: true}, info)
	changes.waitPast(t, seen)
	assert.Contains(t, resourceURIs(t, cs), "runtimectl://sessions/"+other+"/history.ipynb")

	var list struct{ Sessions []session.Info }
	structured(t, call(t, cs, "list_sessions", nil), &list)
	var listed []string
	for _, in := range list.Sessions {
		listed = append(listed, in.Name)
	}
	assert.Contains(t, listed, other)

	_, e := run(t, cs, map[string]any{"code": "A=7; cd /tmp", "session": other})
	assert.Equal(t, "ok", e.Status)
	structured(t, call(t, cs, "stop_session", map[string]any{"session": other}), &info)
	assert.Equal(t, "stopped", info.State)
	_, e = run(t, cs, map[string]any{"code": "echo $A $PWD", "session": other})
	assert.Equal(t, "7 /tmp\n", e.Stdout, "a call on a stopped session starts it with its state")

	structured(t, call(t, cs, "stop_session", map[string]any{"session": other}), &info)
	structured(t, call(t, cs, "start_session", map[string]any{"name": other}), &info)
	assert.False(t, info.New)
	assert.Contains(t, info.Message, "started it again")
	res := call(t, cs, "start_session", map[string]any{"name": other, "language": "python"})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "--lang python (the session has bash)")

	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "runtimectl://sessions/" + other + "/history.ipynb"})
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	var nb struct {
		NBFormat int `json:"nbformat"`
		Cells    []struct {
			Source any `json:"source"`
		} `json:"cells"`
	}
	require.NoError(t, json.Unmarshal([]byte(rr.Contents[0].Text), &nb))
	assert.Equal(t, 4, nb.NBFormat)
	assert.Len(t, nb.Cells, 2)

	seen = changes.count()
	var rm struct{ Removed string }
	structured(t, call(t, cs, "remove_session", map[string]any{"session": other}), &rm)
	assert.Equal(t, other, rm.Removed)
	changes.waitPast(t, seen)
	assert.NotContains(t, resourceURIs(t, cs), "runtimectl://sessions/"+other+"/history.ipynb")
	_, err = c.RecordedSettings(context.Background(), other)
	assert.ErrorIs(t, err, session.ErrNotFound)
	res = call(t, cs, "run_code", map[string]any{"code": "echo", "session": other})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "no such session")
	_, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "runtimectl://sessions/" + other + "/history.ipynb"})
	assert.Error(t, err, "a removed session's history is not found")
}

func TestAFigureComesBackAsAnImageAndAsAResource(t *testing.T) {
	cfg, _ := realConfig(t)
	_, cs := connect(t, cfg, nil)
	res, e := run(t, cs, map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('sales')\nprint('plotted')"})
	require.Len(t, e.Outputs, 1, text(res))
	assert.Equal(t, "image/png", e.Outputs[0].Mime)
	assert.Equal(t, "runtimectl://sessions/"+cfg.Spec.Name+"/outputs/exec-1-1.png", e.Outputs[0].URI)
	var img *mcp.ImageContent
	for _, c := range res.Content {
		if i, ok := c.(*mcp.ImageContent); ok {
			img = i
		}
	}
	require.NotNil(t, img, "the figure is image content")
	assert.Equal(t, "image/png", img.MIMEType)
	assert.True(t, bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")))
	assert.Contains(t, text(res), "plotted")

	assert.Contains(t, resourceURIs(t, cs), e.Outputs[0].URI, "the output is listed")
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: e.Outputs[0].URI})
	require.NoError(t, err)
	assert.Equal(t, "image/png", rr.Contents[0].MIMEType)
	assert.Equal(t, img.Data, rr.Contents[0].Blob)

	// A DataFrame's HTML is an embedded resource, beside its repr as the result.
	res, e = run(t, cs, map[string]any{"code": "import pandas as pd\npd.DataFrame({'region': ['eu', 'us'], 'amount': [3, 4]})"})
	var html *mcp.EmbeddedResource
	for _, c := range res.Content {
		if r, ok := c.(*mcp.EmbeddedResource); ok && r.Resource.MIMEType == "text/html" {
			html = r
		}
	}
	require.NotNil(t, html, text(res))
	assert.Contains(t, html.Resource.Text, "<table")
	assert.Contains(t, text(res), "region")
}

func TestDisplaysComeBackAsTheirContentTypesInOrder(t *testing.T) {
	cfg, _ := realConfig(t)
	_, cs := connect(t, cfg, nil)
	code := "from IPython.display import display, HTML, Markdown\n" +
		"import matplotlib.pyplot as plt\n" +
		"display(HTML('<b>bold</b>'))\n" +
		"plt.plot([1, 3, 2])\n" +
		"plt.show()\n" +
		"display(Markdown('# Title'))\n" +
		"print('done')"
	res, e := run(t, cs, map[string]any{"code": code})
	require.Equal(t, "ok", e.Status, text(res))
	var kinds []string
	for _, d := range e.Displays {
		kinds = append(kinds, d.Kind+" "+strings.Join(d.Mimes, ","))
	}
	assert.Equal(t, []string{"display_data text/html,text/plain", "display_data image/png,text/plain", "display_data text/markdown,text/plain"}, kinds,
		"the structured content lists the displays")
	require.Len(t, e.Outputs, 1, "the figure is saved too")

	var got []string
	var img *mcp.ImageContent
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.EmbeddedResource:
			got = append(got, "resource "+c.Resource.MIMEType+" "+c.Resource.Text)
		case *mcp.ImageContent:
			got = append(got, "image "+c.MIMEType)
			img = c
		case *mcp.TextContent:
			if c.Text == "# Title" || c.Text == "done\n" {
				got = append(got, "text "+c.Text)
			}
		default:
			got = append(got, fmt.Sprintf("%T", c))
		}
	}
	assert.Equal(t, []string{"text done\n", "resource text/html <b>bold</b>", "image image/png", "text # Title"}, got,
		"stdout, then each display once as its content type, in order (the figure not again as its saved file)")
	require.NotNil(t, img)
	assert.True(t, bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")))
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: e.Outputs[0].URI})
	require.NoError(t, err)
	assert.Equal(t, img.Data, rr.Contents[0].Blob, "the figure shown is the one saved")
}

func TestCancellingACallInterruptsTheCodeAndKeepsTheState(t *testing.T) {
	cfg, c := realConfig(t)
	cfg.ProgressEvery = 100 * time.Millisecond
	started := make(chan struct{})
	var once sync.Once
	_, cs := connect(t, cfg, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		if strings.Contains(req.Params.Message, "busy") {
			once.Do(func() { close(started) })
		}
	}})
	_, e := run(t, cs, map[string]any{"code": "kept = 'before'"})
	require.Equal(t, "ok", e.Status)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "print('busy', flush=True)\ni = 0\nwhile True:\n    i += 1"}}
	params.SetProgressToken("busy-loop")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(2 * time.Minute):
		t.Fatal("no progress notification with the loop's output")
	}
	cancel() // the client sends notifications/cancelled
	require.ErrorIs(t, <-done, context.Canceled)

	_, e = run(t, cs, map[string]any{"code": "(kept, i > 0)"})
	require.NotNil(t, e.Result)
	assert.Equal(t, "('before', True)", *e.Result, "the loop was interrupted and the state kept")
	execs, _, err := c.History(context.Background(), cfg.Spec.Name)
	require.NoError(t, err)
	require.Len(t, execs, 3)
	assert.Equal(t, "interrupted", string(execs[1].Status))
}

func TestProgressNotificationsCarryTheOutputSoFar(t *testing.T) {
	cfg, _ := realConfig(t)
	cfg.ProgressEvery = 100 * time.Millisecond
	var mu sync.Mutex
	var messages []string
	var progress []float64
	_, cs := connect(t, cfg, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		messages = append(messages, req.Params.Message)
		progress = append(progress, req.Params.Progress)
	}})
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "import time\nfor k in range(20):\n    print('line', k, flush=True)\n    time.sleep(0.15)"}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(context.Background(), params)
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, messages)
	var withOutput int
	for _, m := range messages {
		if strings.Contains(m, "line ") {
			withOutput++
		}
	}
	assert.Positive(t, withOutput, "progress carries output: %q", messages)
	for i := 1; i < len(progress); i++ {
		assert.Greater(t, progress[i], progress[i-1], "progress increases")
	}

	// A call without a progress token gets none.
	n := len(messages)
	mu.Unlock()
	_, e := run(t, cs, map[string]any{"code": "import time; time.sleep(0.5); print('quiet')"})
	mu.Lock()
	assert.Equal(t, "quiet\n", e.Stdout)
	assert.Equal(t, n, len(messages))
}

// The installer reaches only its index (an operator's, here on this host: session.WithInstallIndex).
func TestInstallPackagesMakesThemImportableAtOnce(t *testing.T) {
	cfg, _ := realConfig(t)
	whl := testenv.Wheel(t, "mcpdemo", 41)
	sum := sha256.Sum256(whl)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/mcpdemo/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<a href="/files/mcpdemo-1.0-py3-none-any.whl#sha256=%x">mcpdemo-1.0-py3-none-any.whl</a>`, sum)
	})
	mux.HandleFunc("/files/mcpdemo-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(whl) })
	base, gw := testenv.ServeOnBridge(t, mux)
	de, err := docker.New("")
	require.NoError(t, err)
	cfg.Client = session.NewWithEngine(de, session.WithInstallIndex(base+"/simple", gw))
	t.Cleanup(func() { cfg.Client.Close() })
	_, cs := connect(t, cfg, nil)
	_, e := run(t, cs, map[string]any{"code": "before = 1"})
	require.Equal(t, "ok", e.Status)
	var out struct{ Session, Output string }
	structured(t, call(t, cs, "install_packages", map[string]any{"packages": []string{"mcpdemo"}}), &out)
	assert.Equal(t, cfg.Spec.Name, out.Session)
	assert.Contains(t, out.Output, "mcpdemo")
	_, e = run(t, cs, map[string]any{"code": "import mcpdemo\nmcpdemo.VALUE + before"})
	require.NotNil(t, e.Result, e.Stderr)
	assert.Equal(t, "42", *e.Result, "importable at once, the state kept")

	res := call(t, cs, "install_packages", map[string]any{"packages": []string{"--index-url=http://evil"}})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "pip's options have their own flags")
}

// Every revision of the spec the SDK negotiates serves the tools; connections that name the
// same session share its state.
func TestEveryRevisionTheSDKNegotiatesRunsCode(t *testing.T) {
	cfg, _ := realConfig(t)
	srv, err := mcpserver.New(cfg)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	versions := mcp.SupportedProtocolVersions()
	require.GreaterOrEqual(t, len(versions), 4)
	for i, v := range versions {
		cs := connectTo(t, srv, nil, v)
		assert.Equal(t, v, cs.InitializeResult().ProtocolVersion)
		_, e := run(t, cs, map[string]any{"code": fmt.Sprintf("n = %d if %d == 0 else n + 1\nn", i, i)})
		require.NotNil(t, e.Result, "%s: %s", v, e.Stderr)
		assert.Equal(t, fmt.Sprint(i), *e.Result, "%s: the state of the connections before", v)
		assert.Equal(t, cfg.Spec.Name, e.Session)
	}
}
