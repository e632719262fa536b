package execproto

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// frames encodes fs back to back, for seeds.
func frames(fs ...Frame) []byte {
	var b []byte
	for _, f := range fs {
		b = AppendFrame(b, f)
	}
	return b
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzReadFrame reads frames from arbitrary bytes until it fails: it must never panic, every
// frame it returns re-encodes (AppendFrame) to exactly the bytes it consumed, and it fails only
// with the errors it documents, io.EOF only at a frame boundary.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(frames(Frame{Type: TypeHello, Payload: []byte(`{"protocol":1}`)}))
	f.Add(frames(
		Frame{Type: TypeStdout, ID: 1, Payload: []byte("out")},
		Frame{Type: TypeInterrupt, ID: 1},
		Frame{Type: TypeResult, ID: 1, Payload: []byte(`{}`)},
	))
	f.Add(frames(Frame{Type: TypeStderr, ID: ^uint32(0), Payload: []byte{0, 0, 0, 0, 9}})[:12])
	f.Add(header(MaxPayload, byte(TypeReply), 3))
	f.Add(header(MaxPayload+1, byte(TypeReply), 3))
	f.Add(header(0, 0, 0))
	f.Add(header(0, byte(TypeNotice)+1, 0))
	f.Add([]byte("\x00\x00\x00"))

	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			before := len(data) - r.Len()
			fr, err := ReadFrame(r)
			after := len(data) - r.Len()
			if err != nil {
				switch {
				case err == io.EOF:
					if before != len(data) {
						t.Fatalf("io.EOF with %d bytes left", len(data)-before)
					}
				case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrBadFrame), errors.Is(err, ErrFrameTooLarge):
				default:
					t.Fatalf("undocumented error: %v", err)
				}
				return
			}
			if !fr.Type.valid() {
				t.Fatalf("returned a frame of type %d", fr.Type)
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("returned a payload of %d bytes", len(fr.Payload))
			}
			if got := AppendFrame(nil, fr); !bytes.Equal(got, data[before:after]) {
				t.Fatalf("re-encoded %x, read %x", got, data[before:after])
			}
			var w bytes.Buffer
			if err := WriteFrame(&w, fr); err != nil || !bytes.Equal(w.Bytes(), data[before:after]) {
				t.Fatalf("WriteFrame: %v, %x", err, w.Bytes())
			}
		}
	})
}

// FuzzClientStream feeds a client arbitrary bytes after a valid Hello while an Exec (id 1) and
// a Call (id 2) wait, then ends the stream. Nothing may panic, and everything must return: the
// calls, the agent's writes (the client must not leave a broken stream unread and open) and
// Close.
func FuzzClientStream(f *testing.F) {
	res := mustJSON(Result{Seq: 1, Status: StatusOK})
	f.Add(frames(Frame{Type: TypeStdout, ID: 1, Payload: []byte("hi")}, Frame{Type: TypeResult, ID: 1, Payload: res}), false)
	f.Add(frames(
		Frame{Type: TypeReply, ID: 2, Payload: mustJSON(Status{Lang: "python"})},
		Frame{Type: TypeNotice, ID: 1, Payload: mustJSON(Notice{Message: "n"})},
		Frame{Type: TypeError, ID: 1, Payload: mustJSON(ErrorReply{Code: "busy", Message: "m"})},
	), true)
	f.Add(frames(Frame{Type: TypeResult, ID: 1, Payload: []byte(`{"seq":"nope"}`)}, Frame{Type: TypeError, ID: 2, Payload: []byte(`[`)}), false)
	f.Add(frames(Frame{Type: TypeReply, ID: 2, Payload: []byte(`{"lang":7}`)}, Frame{Type: TypeHello, ID: 1}), true)
	f.Add(append(frames(Frame{Type: TypeStdout, ID: 1, Payload: []byte("x")}), header(MaxPayload+1, byte(TypeStdout), 1)...), false)
	f.Add(append(frames(Frame{Type: TypeStderr, ID: 1, Payload: []byte("x")}), 0, 0, 0, 5, byte(TypeStdout), 0, 0), true)
	f.Add([]byte("garbage that is no frame at all"), false)
	f.Add([]byte{}, true)

	f.Fuzz(func(t *testing.T, data []byte, cancelExec bool) {
		const limit = 5 * time.Second
		deadline := time.After(limit)
		cconn, sconn := net.Pipe()
		defer sconn.Close()
		scc := make(chan *ServerConn, 1)
		go func() {
			sc, _ := NewServerConn(sconn, Hello{Lang: "python"})
			scc <- sc
		}()
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		c, err := NewClient(ctx, cconn)
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		defer c.Close()
		if <-scc == nil {
			t.Fatal("NewServerConn failed")
		}
		// The agent's reader: it must see the two requests, then it drains whatever comes.
		reqs := make(chan Frame, 2)
		go func() {
			defer close(reqs)
			n := 0
			for {
				fr, err := ReadFrame(sconn)
				if err != nil {
					return
				}
				if fr.Type == TypeRequest && n < 2 {
					n++
					reqs <- fr
				}
			}
		}()
		waitReq := func(wantID uint32) {
			select {
			case fr := <-reqs:
				if fr.ID != wantID {
					t.Fatalf("request id %d, want %d", fr.ID, wantID)
				}
			case <-deadline:
				t.Fatal("timed out waiting for a request")
			}
		}

		execCtx, cancelExecCtx := context.WithCancel(context.Background())
		defer cancelExecCtx()
		type outcome struct {
			res *Result
			err error
		}
		execDone := make(chan outcome, 1)
		go func() {
			res, err := c.Exec(execCtx, Request{Code: "x"}, Handlers{Stdout: func([]byte) {}, Notice: func(string) {}}, nil)
			execDone <- outcome{res, err}
		}()
		waitReq(1)
		callDone := make(chan error, 1)
		go func() {
			var st Status
			callDone <- c.Call(context.Background(), Request{Op: OpStatus}, &st)
		}()
		waitReq(2)
		if cancelExec {
			cancelExecCtx()
		}

		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = sconn.Write(data)
			// One more write: a client that stopped reading must have closed its end, or this
			// blocks for ever (the first write may have landed whole in the client's buffer).
			_, _ = sconn.Write(frames(Frame{Type: TypeStdout, ID: 99, Payload: []byte("end")}))
			sconn.Close()
		}()

		select {
		case o := <-execDone:
			if o.err == nil && o.res == nil {
				t.Fatal("Exec returned neither a result nor an error")
			}
		case <-deadline:
			t.Fatal("Exec hung")
		}
		select {
		case <-callDone:
		case <-deadline:
			t.Fatal("Call hung")
		}
		select {
		case <-wrote:
		case <-deadline:
			t.Fatal("the agent's write hung: the client stopped reading but kept the stream open")
		}
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		select {
		case <-closed:
		case <-deadline:
			t.Fatal("Close hung")
		}
	})
}
