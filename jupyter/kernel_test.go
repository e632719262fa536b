package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBackend answers as its func fields say.
type fakeBackend struct {
	mu         sync.Mutex
	count      int64
	execute    func(ctx context.Context, req ExecuteRequest, out *Publisher) ExecuteReply
	interrupts int
	interrupt  chan struct{}
	shutdowns  []bool
}

func (b *fakeBackend) Info(context.Context) KernelInfo {
	return KernelInfo{Implementation: "fake", LanguageInfo: LanguageInfo{Name: "python", Mimetype: "text/x-python", FileExtension: ".py"}}
}

func (b *fakeBackend) Execute(ctx context.Context, req ExecuteRequest, out *Publisher) ExecuteReply {
	b.mu.Lock()
	b.count++
	n := b.count
	b.mu.Unlock()
	out.Input(req.Code, n)
	if b.execute != nil {
		r := b.execute(ctx, req, out)
		r.ExecutionCount = n
		return r
	}
	out.Stream(Stdout, "out:"+req.Code+"\n")
	out.Result(n, TextBundle("'"+req.Code+"'"), nil)
	return ExecuteReply{Status: StatusOK, ExecutionCount: n}
}

func (b *fakeBackend) Complete(_ context.Context, req CompleteRequest) (CompleteReply, error) {
	return CompleteReply{Matches: []string{req.Code + "_a", req.Code + "_b"}, CursorStart: 0, CursorEnd: req.CursorPos}, nil
}

func (b *fakeBackend) Inspect(_ context.Context, req InspectRequest) (InspectReply, error) {
	if req.Code == "missing" {
		return InspectReply{}, errors.New("no such name")
	}
	return InspectReply{Found: true, Data: TextBundle("doc of " + req.Code)}, nil
}

func (b *fakeBackend) IsComplete(_ context.Context, req IsCompleteRequest) (IsCompleteReply, error) {
	if req.Code == "for x in y:" {
		return IsCompleteReply{Status: "incomplete", Indent: "    "}, nil
	}
	return IsCompleteReply{Status: "complete"}, nil
}

func (b *fakeBackend) History(_ context.Context, req HistoryRequest) ([]HistoryEntry, error) {
	out := "1"
	return []HistoryEntry{{Session: 0, Line: 1, Input: "x = 1"}, {Session: 0, Line: 2, Input: "x", Output: &out}}, nil
}

func (b *fakeBackend) Interrupt(context.Context) error {
	b.mu.Lock()
	b.interrupts++
	b.mu.Unlock()
	if b.interrupt != nil {
		b.interrupt <- struct{}{}
	}
	return nil
}

func (b *fakeBackend) Shutdown(_ context.Context, restart bool) error {
	b.mu.Lock()
	b.shutdowns = append(b.shutdowns, restart)
	b.mu.Unlock()
	return nil
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// testClient is a Jupyter client: DEALER sockets on shell and control, SUB on iopub, REQ on
// the heartbeat.
type testClient struct {
	t                     *testing.T
	signer                Signer
	session               string
	shell, control, iopub zmq4.Socket
	hb                    zmq4.Socket
	iopubMsgs             chan *Message
}

type running struct {
	k    *Kernel
	b    *fakeBackend
	conn ConnectionInfo
	done chan ShutdownRequest
	c    *testClient
}

func startKernel(t *testing.T, b *fakeBackend) *running {
	t.Helper()
	p := freePorts(t, 5)
	conn := ConnectionInfo{Transport: "tcp", IP: "127.0.0.1", ShellPort: p[0], IOPubPort: p[1], StdinPort: p[2], ControlPort: p[3], HBPort: p[4], Key: "a-key", SignatureScheme: "hmac-sha256"}
	k, err := New(Config{Conn: conn, Backend: b})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan ShutdownRequest, 1)
	go func() {
		req, err := k.Run(ctx)
		assert.NoError(t, err)
		done <- req
	}()
	r := &running{k: k, b: b, conn: conn, done: done}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the kernel did not end")
		}
	})
	r.c = dial(t, conn)
	// Wait until the kernel answers and iopub is subscribed (a kernel_info's busy arrives).
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		id := r.c.send(r.c.shell, "kernel_info_request", map[string]any{})
		if m := r.c.iopubUntil(time.Second, func(m *Message) bool { return m.ParentHeader().MsgID == id && isStatus(m, "idle") }); m != nil {
			r.c.recv(r.c.shell, 5*time.Second)
			return r
		}
		r.c.recv(r.c.shell, 5*time.Second)
	}
	t.Fatal("the kernel never answered")
	return nil
}

func dial(t *testing.T, conn ConnectionInfo) *testClient {
	s, _ := NewSigner(conn.SignatureScheme, conn.Key)
	ctx := context.Background()
	c := &testClient{t: t, signer: s, session: NewID(), iopubMsgs: make(chan *Message, 1000)}
	c.shell = zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity(c.session)))
	c.control = zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity(c.session)))
	c.iopub = zmq4.NewSub(ctx)
	c.hb = zmq4.NewReq(ctx)
	for _, d := range []struct {
		s    zmq4.Socket
		port int
	}{{c.shell, conn.ShellPort}, {c.control, conn.ControlPort}, {c.iopub, conn.IOPubPort}, {c.hb, conn.HBPort}} {
		require.NoError(t, d.s.Dial(conn.Endpoint(d.port)))
	}
	require.NoError(t, c.iopub.SetOption(zmq4.OptionSubscribe, ""))
	go func() {
		for {
			raw, err := c.iopub.Recv()
			if err != nil {
				close(c.iopubMsgs)
				return
			}
			m, err := Parse(raw.Frames, s)
			if err != nil {
				t.Errorf("iopub message does not parse: %v", err)
				continue
			}
			c.iopubMsgs <- m
		}
	}()
	t.Cleanup(func() {
		for _, s := range []zmq4.Socket{c.shell, c.control, c.iopub, c.hb} {
			s.Close()
		}
	})
	return c
}

func (c *testClient) send(s zmq4.Socket, msgType string, content any) string {
	m, err := Reply(nil, c.session, msgType, content)
	require.NoError(c.t, err)
	m.Header.Username = "test"
	require.NoError(c.t, s.Send(zmq4.NewMsgFrom(m.Frames(c.signer)...)))
	return m.Header.MsgID
}

func (c *testClient) recv(s zmq4.Socket, timeout time.Duration) *Message {
	type got struct {
		m   *Message
		err error
	}
	ch := make(chan got, 1)
	go func() {
		raw, err := s.Recv()
		if err != nil {
			ch <- got{nil, err}
			return
		}
		m, err := Parse(raw.Frames, c.signer)
		ch <- got{m, err}
	}()
	select {
	case g := <-ch:
		require.NoError(c.t, g.err)
		return g.m
	case <-time.After(timeout):
		c.t.Fatal("no reply within", timeout)
		return nil
	}
}

// iopubUntil returns the first iopub message that stop accepts, or nil after timeout.
func (c *testClient) iopubUntil(timeout time.Duration, stop func(*Message) bool) *Message {
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-c.iopubMsgs:
			if !ok {
				return nil
			}
			if stop(m) {
				return m
			}
		case <-deadline:
			return nil
		}
	}
}

// iopubFor collects the iopub messages parented to id, up to its idle status.
func (c *testClient) iopubFor(id string) []*Message {
	var out []*Message
	m := c.iopubUntil(10*time.Second, func(m *Message) bool {
		if m.ParentHeader().MsgID != id {
			return false
		}
		out = append(out, m)
		return isStatus(m, "idle")
	})
	require.NotNil(c.t, m, "no idle status for %s; got %v", id, types(out))
	return out
}

func isStatus(m *Message, state string) bool {
	if m.Header.MsgType != "status" {
		return false
	}
	var s struct {
		State string `json:"execution_state"`
	}
	_ = json.Unmarshal(m.Content, &s)
	return s.State == state
}

func types(ms []*Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Header.MsgType)
	}
	return out
}

func content(t *testing.T, m *Message) map[string]any {
	var v map[string]any
	require.NoError(t, json.Unmarshal(m.Content, &v))
	return v
}

func TestKernelInfo(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	id := r.c.send(r.c.shell, "kernel_info_request", map[string]any{})
	rep := r.c.recv(r.c.shell, 5*time.Second)
	assert.Equal(t, "kernel_info_reply", rep.Header.MsgType)
	assert.Equal(t, id, rep.ParentHeader().MsgID)
	c := content(t, rep)
	assert.Equal(t, "ok", c["status"])
	assert.Equal(t, "5.3", c["protocol_version"])
	assert.Equal(t, "python", c["language_info"].(map[string]any)["name"])
	assert.Equal(t, []any{}, c["help_links"])
	assert.Equal(t, []string{"status", "status"}, types(r.c.iopubFor(id)))

	// kernel_info on control too (jupyter_client asks there while the shell is busy).
	id = r.c.send(r.c.control, "kernel_info_request", map[string]any{})
	rep = r.c.recv(r.c.control, 5*time.Second)
	assert.Equal(t, "kernel_info_reply", rep.Header.MsgType)
	assert.Equal(t, id, rep.ParentHeader().MsgID)
}

func TestExecuteMessagesInOrder(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	id := r.c.send(r.c.shell, "execute_request", ExecuteRequest{Code: "1+1"})
	rep := r.c.recv(r.c.shell, 5*time.Second)
	assert.Equal(t, "execute_reply", rep.Header.MsgType)
	c := content(t, rep)
	assert.Equal(t, "ok", c["status"])
	assert.Equal(t, float64(1), c["execution_count"])
	assert.Equal(t, map[string]any{}, c["user_expressions"])
	assert.Equal(t, []any{}, c["payload"])

	msgs := r.c.iopubFor(id)
	assert.Equal(t, []string{"status", "execute_input", "stream", "execute_result", "status"}, types(msgs))
	assert.True(t, isStatus(msgs[0], "busy"))
	assert.Equal(t, map[string]any{"code": "1+1", "execution_count": float64(1)}, content(t, msgs[1]))
	assert.Equal(t, map[string]any{"name": "stdout", "text": "out:1+1\n"}, content(t, msgs[2]))
	res := content(t, msgs[3])
	assert.Equal(t, float64(1), res["execution_count"])
	assert.Equal(t, map[string]any{"text/plain": "'1+1'"}, res["data"])
	assert.Equal(t, map[string]any{}, res["metadata"])
	for _, m := range msgs {
		assert.Equal(t, r.k.session, m.Header.Session, "every message names the kernel's session")
		assert.Equal(t, id, m.ParentHeader().MsgID)
	}

	id = r.c.send(r.c.shell, "execute_request", ExecuteRequest{Code: "2"})
	assert.Equal(t, float64(2), content(t, r.c.recv(r.c.shell, 5*time.Second))["execution_count"])
	r.c.iopubFor(id)
}

func TestExecuteErrorPublishesTraceback(t *testing.T) {
	b := &fakeBackend{execute: func(_ context.Context, _ ExecuteRequest, out *Publisher) ExecuteReply {
		out.Stream(Stderr, "warning\n")
		return ExecuteReply{Status: StatusError, Ename: "NameError", Evalue: "name 'y' is not defined", Traceback: []string{"Traceback (most recent call last):", "NameError: name 'y' is not defined"}}
	}}
	r := startKernel(t, b)
	id := r.c.send(r.c.shell, "execute_request", ExecuteRequest{Code: "y"})
	c := content(t, r.c.recv(r.c.shell, 5*time.Second))
	assert.Equal(t, "error", c["status"])
	assert.Equal(t, "NameError", c["ename"])
	msgs := r.c.iopubFor(id)
	assert.Equal(t, []string{"status", "execute_input", "stream", "error", "status"}, types(msgs))
	e := content(t, msgs[3])
	assert.Equal(t, "NameError", e["ename"])
	assert.Equal(t, "name 'y' is not defined", e["evalue"])
	assert.Len(t, e["traceback"], 2)
}

func TestDisplaysAndClear(t *testing.T) {
	b := &fakeBackend{execute: func(_ context.Context, _ ExecuteRequest, out *Publisher) ExecuteReply {
		out.Display(Bundle{"text/plain": json.RawMessage(`"<img>"`), "image/png": json.RawMessage(`"iVBOR"`)}, json.RawMessage(`{"image/png":{"width":10}}`), "", false)
		out.Display(TextBundle("a"), nil, "d1", false)
		out.Display(TextBundle("b"), nil, "d1", true)
		out.Clear(true)
		return ExecuteReply{Status: StatusOK}
	}}
	r := startKernel(t, b)
	id := r.c.send(r.c.shell, "execute_request", ExecuteRequest{Code: "show()"})
	r.c.recv(r.c.shell, 5*time.Second)
	msgs := r.c.iopubFor(id)
	require.Equal(t, []string{"status", "execute_input", "display_data", "display_data", "update_display_data", "clear_output", "status"}, types(msgs))
	d := content(t, msgs[2])
	assert.Equal(t, "iVBOR", d["data"].(map[string]any)["image/png"])
	assert.Equal(t, map[string]any{"image/png": map[string]any{"width": float64(10)}}, d["metadata"])
	assert.Equal(t, map[string]any{}, d["transient"])
	assert.Equal(t, map[string]any{"display_id": "d1"}, content(t, msgs[3])["transient"])
	assert.Equal(t, map[string]any{"display_id": "d1"}, content(t, msgs[4])["transient"])
	assert.Equal(t, true, content(t, msgs[5])["wait"])
}

func TestSilentExecutePublishesOnlyStatus(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	id := r.c.send(r.c.shell, "execute_request", ExecuteRequest{Code: "x", Silent: true})
	assert.Equal(t, "ok", content(t, r.c.recv(r.c.shell, 5*time.Second))["status"])
	assert.Equal(t, []string{"status", "status"}, types(r.c.iopubFor(id)))
}

func TestIntrospectionRequests(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	for _, tc := range []struct {
		req, rep string
		content  any
		check    func(map[string]any)
	}{
		{"complete_request", "complete_reply", CompleteRequest{Code: "pri", CursorPos: 3}, func(c map[string]any) {
			assert.Equal(t, []any{"pri_a", "pri_b"}, c["matches"])
			assert.Equal(t, float64(3), c["cursor_end"])
			assert.Equal(t, map[string]any{}, c["metadata"])
		}},
		{"inspect_request", "inspect_reply", InspectRequest{Code: "len", CursorPos: 3}, func(c map[string]any) {
			assert.Equal(t, true, c["found"])
			assert.Equal(t, map[string]any{"text/plain": "doc of len"}, c["data"])
		}},
		{"inspect_request", "inspect_reply", InspectRequest{Code: "missing", CursorPos: 3}, func(c map[string]any) {
			assert.Equal(t, "ok", c["status"], "a backend's failure is not found, not an error")
			assert.Equal(t, false, c["found"])
			assert.Equal(t, map[string]any{}, c["data"])
		}},
		{"is_complete_request", "is_complete_reply", IsCompleteRequest{Code: "for x in y:"}, func(c map[string]any) {
			assert.Equal(t, "incomplete", c["status"])
			assert.Equal(t, "    ", c["indent"])
		}},
		{"history_request", "history_reply", HistoryRequest{HistAccessType: "tail", N: 10, Output: true}, func(c map[string]any) {
			assert.Equal(t, []any{[]any{float64(0), float64(1), []any{"x = 1", nil}}, []any{float64(0), float64(2), []any{"x", "1"}}}, c["history"])
		}},
		{"history_request", "history_reply", HistoryRequest{HistAccessType: "tail", N: 10}, func(c map[string]any) {
			assert.Equal(t, []any{[]any{float64(0), float64(1), "x = 1"}, []any{float64(0), float64(2), "x"}}, c["history"])
		}},
		{"comm_info_request", "comm_info_reply", map[string]any{}, func(c map[string]any) {
			assert.Equal(t, map[string]any{}, c["comms"])
		}},
	} {
		t.Run(tc.req, func(t *testing.T) {
			id := r.c.send(r.c.shell, tc.req, tc.content)
			rep := r.c.recv(r.c.shell, 5*time.Second)
			assert.Equal(t, tc.rep, rep.Header.MsgType)
			assert.Equal(t, id, rep.ParentHeader().MsgID)
			c := content(t, rep)
			if tc.rep != "is_complete_reply" { // its status is the answer
				assert.Equal(t, "ok", c["status"])
			}
			tc.check(c)
			r.c.iopubFor(id)
		})
	}
}

func TestCommOpenIsClosed(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	id := r.c.send(r.c.shell, "comm_open", map[string]any{"comm_id": "c1", "target_name": "jupyter.widget", "data": map[string]any{}})
	msgs := r.c.iopubFor(id)
	require.Equal(t, []string{"status", "comm_close", "status"}, types(msgs))
	assert.Equal(t, "c1", content(t, msgs[1])["comm_id"])
}

func TestInterruptOnControlWhileShellRuns(t *testing.T) {
	b := &fakeBackend{interrupt: make(chan struct{}, 1)}
	running := make(chan struct{})
	b.execute = func(ctx context.Context, _ ExecuteRequest, out *Publisher) ExecuteReply {
		close(running)
		select {
		case <-b.interrupt:
		case <-time.After(10 * time.Second):
		}
		return ExecuteReply{Status: StatusError, Ename: "KeyboardInterrupt", Traceback: []string{"KeyboardInterrupt"}}
	}
	r := startKernel(t, b)
	r.c.send(r.c.shell, "execute_request", ExecuteRequest{Code: "while True: pass"})
	<-running
	id := r.c.send(r.c.control, "interrupt_request", map[string]any{})
	rep := r.c.recv(r.c.control, 5*time.Second)
	assert.Equal(t, "interrupt_reply", rep.Header.MsgType)
	assert.Equal(t, id, rep.ParentHeader().MsgID)
	c := content(t, r.c.recv(r.c.shell, 5*time.Second))
	assert.Equal(t, "error", c["status"])
	assert.Equal(t, "KeyboardInterrupt", c["ename"])
}

func TestShutdownRestart(t *testing.T) {
	for _, restart := range []bool{true, false} {
		r := startKernel(t, &fakeBackend{})
		id := r.c.send(r.c.control, "shutdown_request", ShutdownRequest{Restart: restart})
		rep := r.c.recv(r.c.control, 5*time.Second)
		assert.Equal(t, "shutdown_reply", rep.Header.MsgType)
		assert.Equal(t, map[string]any{"status": "ok", "restart": restart}, content(t, rep))
		select {
		case req := <-r.done:
			assert.Equal(t, restart, req.Restart)
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the shutdown")
		}
		r.done <- ShutdownRequest{} // for the cleanup
		assert.Equal(t, []bool{restart}, r.b.shutdowns)
		assert.Nil(t, r.c.iopubUntil(200*time.Millisecond, func(m *Message) bool { return m.ParentHeader().MsgID == id }),
			"no status for a shutdown: a client reading until idle must not stop at it")
	}
}

func TestBadSignatureDropped(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	forger := &testClient{t: t, signer: Signer{key: []byte("wrong"), h: r.c.signer.h}, session: r.c.session}
	forger.send(r.c.shell, "execute_request", ExecuteRequest{Code: "forged"})
	id := r.c.send(r.c.shell, "kernel_info_request", map[string]any{})
	rep := r.c.recv(r.c.shell, 5*time.Second)
	assert.Equal(t, "kernel_info_reply", rep.Header.MsgType, "the forged request got no reply: the next reply is the real request's")
	assert.Equal(t, id, rep.ParentHeader().MsgID)
	assert.Equal(t, int64(0), r.b.count, "the forged code never ran")
}

func TestHeartbeatEchoes(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	for _, ping := range []string{"ping", "again"} {
		require.NoError(t, r.c.hb.Send(zmq4.NewMsgString(ping)))
		m, err := r.c.hb.Recv()
		require.NoError(t, err)
		assert.Equal(t, ping, string(m.Bytes()))
	}
}

func TestUnknownMessageGetsNoReply(t *testing.T) {
	r := startKernel(t, &fakeBackend{})
	r.c.send(r.c.shell, "frobnicate_request", map[string]any{})
	id := r.c.send(r.c.shell, "kernel_info_request", map[string]any{})
	assert.Equal(t, id, r.c.recv(r.c.shell, 5*time.Second).ParentHeader().MsgID)
}

// A client whose iopub connects after it has asked (as a restarted kernel's client may: its
// sockets reconnect one by one) still gets the busy status of its first request: the kernel
// waits for an iopub subscription before it answers the first request.
func TestFirstRequestWaitsForTheSubscriber(t *testing.T) {
	p := freePorts(t, 5)
	conn := ConnectionInfo{Transport: "tcp", IP: "127.0.0.1", ShellPort: p[0], IOPubPort: p[1], StdinPort: p[2], ControlPort: p[3], HBPort: p[4], Key: "k", SignatureScheme: "hmac-sha256"}
	k, err := New(Config{Conn: conn, Backend: &fakeBackend{}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _, _ = k.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	s, _ := NewSigner(conn.SignatureScheme, conn.Key)
	c := &testClient{t: t, signer: s, session: NewID(), iopubMsgs: make(chan *Message, 100)}
	c.shell = zmq4.NewDealer(context.Background(), zmq4.WithID(zmq4.SocketIdentity(c.session)))
	t.Cleanup(func() { c.shell.Close() })
	require.NoError(t, c.shell.Dial(conn.Endpoint(conn.ShellPort)))
	id := c.send(c.shell, "execute_request", ExecuteRequest{Code: "1"})
	time.Sleep(300 * time.Millisecond)
	late := dial(t, conn)
	msgs := late.iopubFor(id)
	assert.True(t, isStatus(msgs[0], "busy"), "got %v", types(msgs))
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := New(Config{})
	assert.Error(t, err)
	_, err = New(Config{Backend: &fakeBackend{}, Conn: ConnectionInfo{ShellPort: 1}})
	assert.ErrorContains(t, err, "port")
}
