package execproto

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wait bounds every blocking step of these tests, so that a bug shows as a failure, not a hang.
const wait = 5 * time.Second

// fakeAgent is the agent's end of a net.Pipe, built on ServerConn. The test drives it by hand:
// it reads what the client sent from frames and answers with sc.
type fakeAgent struct {
	sc     *ServerConn
	raw    net.Conn   // the pipe itself, for bytes ServerConn would refuse to write
	frames chan Frame // what the client sent, in order; closed when the client's side ends
}

var testHello = Hello{Agent: "0.0.0-test", Lang: "python", Session: "s1"}

// newPair connects a Client to a fakeAgent over net.Pipe. Both are closed when the test ends.
func newPair(t *testing.T) (*Client, *fakeAgent) {
	t.Helper()
	cconn, sconn := net.Pipe()
	scc := make(chan *ServerConn, 1)
	go func() {
		sc, err := NewServerConn(sconn, testHello)
		if err != nil {
			sconn.Close()
		}
		scc <- sc
	}()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	c, err := NewClient(ctx, cconn)
	require.NoError(t, err)
	sc := <-scc
	require.NotNil(t, sc)
	fa := &fakeAgent{sc: sc, raw: sconn, frames: make(chan Frame, 4096)}
	go func() {
		defer close(fa.frames)
		for {
			f, err := sc.Next()
			if err != nil {
				return
			}
			fa.frames <- f
		}
	}()
	t.Cleanup(func() {
		_ = c.Close()
		_ = sc.Close()
	})
	return c, fa
}

// next returns the next frame the client sent.
func (fa *fakeAgent) next(t *testing.T) Frame {
	t.Helper()
	select {
	case f, ok := <-fa.frames:
		require.True(t, ok, "the client's side ended")
		return f
	case <-time.After(wait):
		t.Fatal("timed out waiting for a frame from the client")
	}
	return Frame{}
}

// request returns the next frame the client sent, which must be a request.
func (fa *fakeAgent) request(t *testing.T) (uint32, Request) {
	t.Helper()
	f := fa.next(t)
	require.Equal(t, TypeRequest, f.Type)
	require.NotZero(t, f.ID, "request ids start at 1")
	var req Request
	require.NoError(t, json.Unmarshal(f.Payload, &req))
	return f.ID, req
}

// rest returns every frame the client sends until its side ends.
func (fa *fakeAgent) rest(t *testing.T) []Frame {
	t.Helper()
	var out []Frame
	for {
		select {
		case f, ok := <-fa.frames:
			if !ok {
				return out
			}
			out = append(out, f)
		case <-time.After(wait):
			t.Fatal("timed out waiting for the client's side to end")
		}
	}
}

func (fa *fakeAgent) send(t *testing.T, typ Type, id uint32, payload string) {
	t.Helper()
	require.NoError(t, fa.sc.Send(typ, id, []byte(payload)))
}

func (fa *fakeAgent) sendJSON(t *testing.T, typ Type, id uint32, v any) {
	t.Helper()
	require.NoError(t, fa.sc.SendJSON(typ, id, v))
}

// recorder collects what an execution streamed to its Handlers.
type recorder struct {
	mu      sync.Mutex
	stdout  strings.Builder
	stderr  strings.Builder
	notices []string
	events  []string // "out:..", "err:..", "notice:..", in arrival order
}

func (r *recorder) handlers() Handlers {
	return Handlers{
		Stdout: func(p []byte) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.stdout.Write(p)
			r.events = append(r.events, "out:"+string(p))
		},
		Stderr: func(p []byte) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.stderr.Write(p)
			r.events = append(r.events, "err:"+string(p))
		},
		Notice: func(m string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.notices = append(r.notices, m)
			r.events = append(r.events, "notice:"+m)
		},
	}
}

func (r *recorder) snapshot() (stdout, stderr string, events []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stdout.String(), r.stderr.String(), append([]string(nil), r.events...)
}

type execOut struct {
	res *Result
	err error
}

// startExec runs c.Exec in a goroutine; its outcome arrives on the returned channel.
func startExec(ctx context.Context, c *Client, req Request, h Handlers, detach <-chan struct{}) chan execOut {
	ch := make(chan execOut, 1)
	go func() {
		res, err := c.Exec(ctx, req, h, detach)
		ch <- execOut{res, err}
	}()
	return ch
}

func waitExec(t *testing.T, ch <-chan execOut) (*Result, error) {
	t.Helper()
	select {
	case o := <-ch:
		return o.res, o.err
	case <-time.After(wait):
		t.Fatal("Exec did not return")
	}
	return nil, nil
}

func TestNewClientHello(t *testing.T) {
	c, _ := newPair(t)
	h := c.Hello()
	assert.Equal(t, Version, h.Protocol, "ServerConn states the version")
	assert.Equal(t, testHello.Agent, h.Agent)
	assert.Equal(t, testHello.Lang, h.Lang)
	assert.Equal(t, testHello.Session, h.Session)
	select {
	case <-c.Done():
		t.Fatal("Done closed on a live connection")
	default:
	}
}

func TestNewClientRefuses(t *testing.T) {
	tests := []struct {
		name     string
		agent    func(conn net.Conn) // writes what the agent would say first
		wantIs   error
		wantMsgs []string
	}{
		{
			name: "other protocol version",
			agent: func(conn net.Conn) {
				_ = WriteFrame(conn, Frame{Type: TypeHello, Payload: []byte(fmt.Sprintf(`{"protocol":%d,"agent":"9.9"}`, Version+1))})
			},
			wantMsgs: []string{fmt.Sprintf("speaks protocol %d", Version+1), fmt.Sprintf("this runtimectl speaks %d", Version), "rebuild the session's image", "rebuild the session's image"},
		},
		{
			name: "protocol missing",
			agent: func(conn net.Conn) {
				_ = WriteFrame(conn, Frame{Type: TypeHello, Payload: []byte(`{"agent":"old"}`)})
			},
			wantMsgs: []string{"speaks protocol 0", "rebuild the session's image"},
		},
		{
			name: "first frame not a hello",
			agent: func(conn net.Conn) {
				_ = WriteFrame(conn, Frame{Type: TypeStdout, ID: 1, Payload: []byte("hi")})
			},
			wantMsgs: []string{"got a stdout frame first"},
		},
		{
			name: "hello not json",
			agent: func(conn net.Conn) {
				_ = WriteFrame(conn, Frame{Type: TypeHello, Payload: []byte(`{"protocol":`)})
			},
			wantMsgs: []string{"decode the agent's hello"},
		},
		{
			name:     "stream ends before the hello",
			agent:    func(conn net.Conn) { conn.Close() },
			wantMsgs: []string{"read the agent's hello"},
		},
		{
			name: "hello too large",
			agent: func(conn net.Conn) {
				_, _ = conn.Write(header(MaxPayload+1, byte(TypeHello), 0))
			},
			wantIs:   ErrFrameTooLarge,
			wantMsgs: []string{"read the agent's hello"},
		},
		{
			name: "garbage",
			agent: func(conn net.Conn) {
				_, _ = conn.Write([]byte("Traceback (most recent call last):\n"))
			},
			wantIs:   ErrBadFrame,
			wantMsgs: []string{"read the agent's hello"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cconn, sconn := net.Pipe()
			defer sconn.Close()
			go tt.agent(sconn)
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			c, err := NewClient(ctx, cconn)
			require.Error(t, err)
			assert.Nil(t, c)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
			for _, m := range tt.wantMsgs {
				assert.Contains(t, err.Error(), m)
			}
			// The client closed its end: the agent's next write fails instead of blocking.
			_ = sconn.SetWriteDeadline(time.Now().Add(wait))
			_, werr := sconn.Write([]byte{0})
			assert.Error(t, werr)
			assert.NotErrorIs(t, werr, os.ErrDeadlineExceeded, "the client's end was left open")
		})
	}
}

func TestNewClientContextEnds(t *testing.T) {
	cconn, sconn := net.Pipe()
	defer sconn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	c, err := NewClient(ctx, cconn) // the agent never speaks
	require.Error(t, err)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "wait for the agent's hello")
}

func TestExecStreamsToHandlers(t *testing.T) {
	c, fa := newPair(t)
	var rec recorder
	done := startExec(t.Context(), c, Request{Op: "ignored", Code: "print('hi')", TimeoutMs: 1500, MaxOutput: 64}, rec.handlers(), nil)

	id, req := fa.request(t)
	assert.Equal(t, Request{Op: OpExec, Code: "print('hi')", TimeoutMs: 1500, MaxOutput: 64}, req, "Exec sets Op")
	fa.send(t, TypeStdout, id, "hi\n")
	fa.send(t, TypeStderr, id, "warn\n")
	fa.sendJSON(t, TypeNotice, id, Notice{Message: "restored x"})
	fa.send(t, TypeNotice, id, "not json") // dropped
	fa.send(t, TypeStdout, id, "\x00\xff")
	fa.send(t, TypeReply, id, `{}`) // not an exec frame: ignored
	result := "None"
	fa.sendJSON(t, TypeResult, id, Result{Session: "s1", Seq: 4, Status: StatusOK, Result: &result, DurationMs: 1.5})

	res, err := waitExec(t, done)
	require.NoError(t, err)
	assert.Equal(t, int64(4), res.Seq)
	assert.Equal(t, StatusOK, res.Status)
	require.NotNil(t, res.Result)
	assert.Equal(t, "None", *res.Result)
	_, _, events := rec.snapshot()
	assert.Equal(t, []string{"out:hi\n", "err:warn\n", "notice:restored x", "out:\x00\xff"}, events)
}

func TestExecNilHandlers(t *testing.T) {
	c, fa := newPair(t)
	done := startExec(t.Context(), c, Request{Code: "x"}, Handlers{}, nil)
	id, _ := fa.request(t)
	fa.send(t, TypeStdout, id, "a")
	fa.send(t, TypeStderr, id, "b")
	fa.sendJSON(t, TypeNotice, id, Notice{Message: "n"})
	fa.sendJSON(t, TypeResult, id, Result{Seq: 1, Status: StatusOK})
	res, err := waitExec(t, done)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Seq)
}

func TestExecConcurrentInterleaved(t *testing.T) {
	c, fa := newPair(t)
	var recA, recB recorder
	doneA := startExec(t.Context(), c, Request{Code: "A"}, recA.handlers(), nil)
	doneB := startExec(t.Context(), c, Request{Code: "B"}, recB.handlers(), nil)

	ids := map[string]uint32{}
	for range 2 {
		id, req := fa.request(t)
		ids[req.Code] = id
	}
	require.Len(t, ids, 2)
	a, b := ids["A"], ids["B"]
	require.NotEqual(t, a, b, "each request has its own id")

	fa.send(t, TypeStdout, a, "a1 ")
	fa.send(t, TypeStdout, b, "b1 ")
	fa.send(t, TypeStderr, a, "a-err")
	fa.send(t, TypeStdout, b, "b2")
	fa.send(t, TypeStderr, b, "b-err")
	fa.sendJSON(t, TypeResult, b, Result{Seq: 2, Status: StatusOK})
	fa.send(t, TypeStdout, a, "a2")
	fa.sendJSON(t, TypeResult, a, Result{Seq: 1, Status: StatusError})

	resB, err := waitExec(t, doneB)
	require.NoError(t, err)
	resA, err := waitExec(t, doneA)
	require.NoError(t, err)
	assert.Equal(t, int64(1), resA.Seq)
	assert.Equal(t, StatusError, resA.Status)
	assert.Equal(t, int64(2), resB.Seq)
	outA, errA, _ := recA.snapshot()
	outB, errB, _ := recB.snapshot()
	assert.Equal(t, "a1 a2", outA)
	assert.Equal(t, "a-err", errA)
	assert.Equal(t, "b1 b2", outB)
	assert.Equal(t, "b-err", errB)
}

// Many executions at once, each answered in a shuffled order frame by frame.
func TestExecManyConcurrent(t *testing.T) {
	c, fa := newPair(t)
	const n = 20
	recs := make([]recorder, n)
	dones := make([]<-chan execOut, n)
	for i := range n {
		dones[i] = startExec(t.Context(), c, Request{Code: fmt.Sprint(i)}, recs[i].handlers(), nil)
	}
	idOf := map[int]uint32{}
	for range n {
		id, req := fa.request(t)
		var i int
		_, err := fmt.Sscan(req.Code, &i)
		require.NoError(t, err)
		idOf[i] = id
	}
	require.Len(t, idOf, n)
	for round := range 3 {
		for i := range n {
			j := (i*7 + round) % n // a different order each round
			fa.send(t, TypeStdout, idOf[j], fmt.Sprintf("%d.%d;", j, round))
		}
	}
	for i := range n {
		fa.sendJSON(t, TypeResult, idOf[i], Result{Seq: int64(i + 1), Status: StatusOK})
	}
	for i := range n {
		res, err := waitExec(t, dones[i])
		require.NoError(t, err)
		assert.Equal(t, int64(i+1), res.Seq)
		out, _, _ := recs[i].snapshot()
		assert.Equal(t, fmt.Sprintf("%d.0;%d.1;%d.2;", i, i, i), out)
	}
}

func TestExecInterruptOnCancel(t *testing.T) {
	c, fa := newPair(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	firstOut := make(chan struct{})
	var once sync.Once
	var rec recorder
	h := rec.handlers()
	stdout := h.Stdout
	h.Stdout = func(p []byte) {
		stdout(p)
		once.Do(func() { close(firstOut) })
	}
	done := startExec(ctx, c, Request{Code: "while True: pass"}, h, nil)

	id, _ := fa.request(t)
	fa.send(t, TypeStdout, id, "working\n")
	select {
	case <-firstOut:
	case <-time.After(wait):
		t.Fatal("no output delivered")
	}
	cancel()

	f := fa.next(t)
	assert.Equal(t, Frame{Type: TypeInterrupt, ID: id}, f, "one interrupt frame, no payload, the exec's id")

	// The code takes a while to stop and prints on its way out; Exec waits for the Result.
	fa.send(t, TypeStderr, id, "KeyboardInterrupt\n")
	fa.send(t, TypeStdout, id, "bye\n")
	fa.sendJSON(t, TypeResult, id, Result{Seq: 3, Status: StatusInterrupted, Message: "interrupted"})
	res, err := waitExec(t, done)
	require.NoError(t, err, "Exec returns the Result after an interrupt")
	assert.Equal(t, StatusInterrupted, res.Status)
	assert.Equal(t, int64(3), res.Seq)
	out, errOut, _ := rec.snapshot()
	assert.Equal(t, "working\nbye\n", out)
	assert.Equal(t, "KeyboardInterrupt\n", errOut)

	require.NoError(t, c.Close())
	assert.Empty(t, fa.rest(t), "exactly one interrupt: nothing more was sent")
}

// A context that is already over when Exec starts still sends the request, then one interrupt.
func TestExecCancelledBeforeStart(t *testing.T) {
	c, fa := newPair(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	done := startExec(ctx, c, Request{Code: "x"}, Handlers{}, nil)
	id, _ := fa.request(t)
	assert.Equal(t, Frame{Type: TypeInterrupt, ID: id}, fa.next(t))
	fa.sendJSON(t, TypeResult, id, Result{Seq: 1, Status: StatusInterrupted})
	res, err := waitExec(t, done)
	require.NoError(t, err)
	assert.Equal(t, StatusInterrupted, res.Status)
	require.NoError(t, c.Close())
	assert.Empty(t, fa.rest(t))
}

func TestExecConnectionClosesMidway(t *testing.T) {
	c, fa := newPair(t)
	var rec recorder
	done := startExec(t.Context(), c, Request{Code: "import os; os._exit(1)"}, rec.handlers(), nil)
	id, _ := fa.request(t)
	fa.send(t, TypeStdout, id, "before")
	require.NoError(t, fa.sc.Close())

	res, err := waitExec(t, done)
	require.Error(t, err)
	assert.Nil(t, res)
	assert.ErrorIs(t, err, ErrClosed)
	out, _, _ := rec.snapshot()
	assert.Equal(t, "before", out, "output that arrived before the end is delivered")
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("Done not closed after the connection ended")
	}
}

// A stream torn inside a frame still ends calls with ErrClosed, and says why.
func TestExecConnectionTornMidFrame(t *testing.T) {
	c, fa := newPair(t)
	done := startExec(t.Context(), c, Request{Code: "x"}, Handlers{}, nil)
	id, _ := fa.request(t)
	whole := AppendFrame(nil, Frame{Type: TypeStdout, ID: id, Payload: []byte("half of this")})
	_, err := fa.raw.Write(whole[:HeaderSize+4])
	require.NoError(t, err)
	require.NoError(t, fa.raw.Close())
	_, err = waitExec(t, done)
	require.ErrorIs(t, err, ErrClosed)
	assert.Contains(t, err.Error(), "unexpected EOF")
}

// The agent's last words before the connection ends are not lost: a final frame that arrived
// before the end wins over the end. The caller is kept busy while both arrive, so that it sees
// the final frame and the end at once (and Go's select picks either); repeated for that reason.
func TestFinalFrameThenClose(t *testing.T) {
	result := func(t *testing.T, fa *fakeAgent, id uint32) {
		fa.sendJSON(t, TypeResult, id, Result{Seq: 1, Status: StatusOK})
	}
	remoteErr := func(t *testing.T, fa *fakeAgent, id uint32) {
		require.NoError(t, fa.sc.SendError(id, "busy", "another execution is running"))
	}
	reply := func(t *testing.T, fa *fakeAgent, id uint32) { fa.sendJSON(t, TypeReply, id, Status{NextSeq: 2}) }
	isResult := func(t *testing.T, res *Result, err error) {
		require.NoError(t, err)
		assert.Equal(t, int64(1), res.Seq)
	}
	isRemote := func(t *testing.T, _ *Result, err error) {
		var re *RemoteError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, "busy", re.Code)
	}
	tests := []struct {
		name  string
		call  bool // Call rather than Exec
		final func(t *testing.T, fa *fakeAgent, id uint32)
		check func(t *testing.T, res *Result, err error)
	}{
		{"exec result", false, result, isResult},
		{"exec error", false, remoteErr, isRemote},
		{"call reply", true, reply, func(t *testing.T, _ *Result, err error) { require.NoError(t, err) }},
		{"call error", true, remoteErr, isRemote},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 {
				c, fa := newPair(t)
				busy := make(chan struct{})
				released := make(chan struct{})
				done := make(chan execOut, 1)
				if tt.call {
					// Call has no handler to hold it up; a frame it ignores, followed at once by
					// many more, keeps it looping while the end arrives.
					go func() { done <- execOut{err: c.Call(t.Context(), Request{Op: OpStatus}, nil)} }()
					close(busy)
				} else {
					var once sync.Once
					h := Handlers{Stdout: func([]byte) {
						once.Do(func() { close(busy); <-released })
					}}
					done = startExec(t.Context(), c, Request{Code: "x"}, h, nil)
				}
				id, _ := fa.request(t)
				fa.send(t, TypeStdout, id, "held")
				<-busy
				for range 100 {
					fa.send(t, TypeStdout, id, "stray")
				}
				tt.final(t, fa, id)
				require.NoError(t, fa.sc.Close())
				select {
				case <-c.Done():
				case <-time.After(wait):
					t.Fatal("Done not closed")
				}
				close(released)
				res, err := waitExec(t, done)
				tt.check(t, res, err)
			}
		})
	}
}

func TestExecRemoteError(t *testing.T) {
	c, fa := newPair(t)
	done := startExec(t.Context(), c, Request{Code: "x"}, Handlers{}, nil)
	id, _ := fa.request(t)
	require.NoError(t, fa.sc.SendError(id, "busy", "the interpreter is restoring"))
	_, err := waitExec(t, done)
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, OpExec, re.Op)
	assert.Equal(t, "busy", re.Code)
	assert.Equal(t, "exec: the interpreter is restoring", err.Error())
}

func TestExecBadFinalFrames(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		payload string
		want    string
	}{
		{"result not json", TypeResult, `{"seq":`, "decode result"},
		{"error not json", TypeError, `nope`, "exec: decode error reply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, fa := newPair(t)
			done := startExec(t.Context(), c, Request{Code: "x"}, Handlers{}, nil)
			id, _ := fa.request(t)
			fa.send(t, tt.typ, id, tt.payload)
			_, err := waitExec(t, done)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestExecDetach(t *testing.T) {
	c, fa := newPair(t)
	detach := make(chan struct{})
	var rec recorder
	done := startExec(t.Context(), c, Request{Code: "sleep"}, rec.handlers(), detach)
	id, _ := fa.request(t)
	fa.send(t, TypeStdout, id, "started")
	close(detach)
	_, err := waitExec(t, done)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "detached")

	// The execution goes on in the agent; its frames no longer have a reader and must not
	// block the connection.
	for range 600 {
		fa.send(t, TypeStdout, id, "more")
	}
	fa.sendJSON(t, TypeResult, id, Result{Seq: 1})
	callDone := make(chan error, 1)
	go func() { callDone <- c.Call(t.Context(), Request{Op: OpStatus}, nil) }()
	callID, _ := fa.request(t)
	fa.sendJSON(t, TypeReply, callID, Status{})
	select {
	case err := <-callDone:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("the connection is stuck after a detach")
	}
}

// More frames than the per-call buffer holds, to a handler that is slow: all arrive, in order.
func TestExecBackpressure(t *testing.T) {
	c, fa := newPair(t)
	var got strings.Builder
	h := Handlers{Stdout: func(p []byte) {
		time.Sleep(10 * time.Microsecond)
		got.Write(p)
	}}
	done := startExec(t.Context(), c, Request{Code: "x"}, h, nil)
	id, _ := fa.request(t)
	var want strings.Builder
	for i := range 2000 {
		s := fmt.Sprintf("%d,", i)
		want.WriteString(s)
		fa.send(t, TypeStdout, id, s)
	}
	fa.sendJSON(t, TypeResult, id, Result{Seq: 9})
	res, err := waitExec(t, done)
	require.NoError(t, err)
	assert.Equal(t, int64(9), res.Seq)
	assert.Equal(t, want.String(), got.String())
}
