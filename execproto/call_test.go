package execproto

// Call, unknown ids, frame limits and Close, over the fake agent of client_test.go.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCall(t *testing.T) {
	tests := []struct {
		name    string
		answer  func(t *testing.T, fa *fakeAgent, id uint32)
		reply   any
		check   func(t *testing.T, reply any, err error)
		wantErr string
	}{
		{
			name: "reply decoded",
			answer: func(t *testing.T, fa *fakeAgent, id uint32) {
				fa.sendJSON(t, TypeReply, id, SnapshotReply{ID: "snap-7", Seq: 7, SizeBytes: 1024, Kept: []string{"df"}})
			},
			reply: &SnapshotReply{},
			check: func(t *testing.T, reply any, err error) {
				require.NoError(t, err)
				assert.Equal(t, &SnapshotReply{ID: "snap-7", Seq: 7, SizeBytes: 1024, Kept: []string{"df"}}, reply)
			},
		},
		{
			name:   "nil reply",
			answer: func(t *testing.T, fa *fakeAgent, id uint32) { fa.send(t, TypeReply, id, `not even json`) },
			reply:  nil,
			check:  func(t *testing.T, _ any, err error) { require.NoError(t, err) },
		},
		{
			name: "other frames ignored until the reply",
			answer: func(t *testing.T, fa *fakeAgent, id uint32) {
				fa.send(t, TypeStdout, id, "stray")
				fa.send(t, TypeResult, id, `{}`)
				fa.sendJSON(t, TypeReply, id, Status{Running: 3})
			},
			reply: &Status{},
			check: func(t *testing.T, reply any, err error) {
				require.NoError(t, err)
				assert.Equal(t, int64(3), reply.(*Status).Running)
			},
		},
		{
			name: "error frame",
			answer: func(t *testing.T, fa *fakeAgent, id uint32) {
				require.NoError(t, fa.sc.SendError(id, "not_found", `no snapshot "abc"`))
			},
			reply: &RestoreInfo{},
			check: func(t *testing.T, _ any, err error) {
				var re *RemoteError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, OpSnapshot, re.Op)
				assert.Equal(t, "not_found", re.Code)
				assert.Equal(t, `no snapshot "abc"`, re.Message)
				assert.Equal(t, `snapshot: no snapshot "abc"`, err.Error())
			},
		},
		{
			name:   "reply not decodable",
			answer: func(t *testing.T, fa *fakeAgent, id uint32) { fa.send(t, TypeReply, id, `{"seq":"x"}`) },
			reply:  &SnapshotReply{},
			check: func(t *testing.T, _ any, err error) {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "decode snapshot reply")
			},
		},
		{
			name:   "error not decodable",
			answer: func(t *testing.T, fa *fakeAgent, id uint32) { fa.send(t, TypeError, id, `[`) },
			reply:  nil,
			check: func(t *testing.T, _ any, err error) {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "snapshot: decode error reply")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, fa := newPair(t)
			errc := make(chan error, 1)
			go func() { errc <- c.Call(t.Context(), Request{Op: OpSnapshot, Note: "n"}, tt.reply) }()
			id, req := fa.request(t)
			assert.Equal(t, Request{Op: OpSnapshot, Note: "n"}, req)
			tt.answer(t, fa, id)
			select {
			case err := <-errc:
				tt.check(t, tt.reply, err)
			case <-time.After(wait):
				t.Fatal("Call did not return")
			}
		})
	}
}

func TestCallContextEnds(t *testing.T) {
	c, fa := newPair(t)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctx, Request{Op: OpDrain}, nil) }()
	id, _ := fa.request(t)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "drain")
	case <-time.After(wait):
		t.Fatal("Call did not return")
	}
	// A late reply for the abandoned call is dropped; the connection still works.
	fa.sendJSON(t, TypeReply, id, Status{})
	go func() { errc <- c.Call(t.Context(), Request{Op: OpStatus}, nil) }()
	id2, _ := fa.request(t)
	assert.NotEqual(t, id, id2)
	fa.sendJSON(t, TypeReply, id2, Status{})
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Call did not return")
	}
}

func TestCallConnectionCloses(t *testing.T) {
	c, fa := newPair(t)
	errc := make(chan error, 1)
	go func() { errc <- c.Call(t.Context(), Request{Op: OpStatus}, nil) }()
	fa.request(t)
	require.NoError(t, fa.sc.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(wait):
		t.Fatal("Call did not return")
	}
}

// Frames for ids nobody waits for (a call that gave up, an agent that is confused) are dropped.
func TestUnknownIDsIgnored(t *testing.T) {
	c, fa := newPair(t)
	errc := make(chan error, 1)
	var st Status
	go func() { errc <- c.Call(t.Context(), Request{Op: OpStatus}, &st) }()
	id, _ := fa.request(t)
	fa.sendJSON(t, TypeReply, id+100, Status{Running: 99})
	fa.sendJSON(t, TypeReply, 0, Status{Running: 98})
	fa.sendJSON(t, TypeReply, id, Status{Running: 1})
	select {
	case err := <-errc:
		require.NoError(t, err)
		assert.Equal(t, int64(1), st.Running)
	case <-time.After(wait):
		t.Fatal("Call did not return")
	}
}

func TestClientRefusesFrameTooLarge(t *testing.T) {
	c, fa := newPair(t)
	errc := make(chan error, 1)
	go func() { errc <- c.Call(t.Context(), Request{Op: OpVars}, nil) }()
	id, _ := fa.request(t)
	// A header that announces one byte more than MaxPayload; the payload never comes.
	_, err := fa.raw.Write(header(MaxPayload+1, byte(TypeReply), id))
	require.NoError(t, err)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, ErrClosed)
		assert.Contains(t, err.Error(), ErrFrameTooLarge.Error())
	case <-time.After(wait):
		t.Fatal("Call did not return")
	}
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("Done not closed")
	}
	// The client hung up: the agent's next write fails rather than blocking forever.
	_ = fa.raw.SetWriteDeadline(time.Now().Add(wait))
	_, err = fa.raw.Write([]byte{1, 2, 3})
	require.Error(t, err)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the client left the broken connection open")
	assert.NoError(t, c.Close(), "Close after the connection ended by itself")
}

func TestClientRefusesToSendFrameTooLarge(t *testing.T) {
	c, fa := newPair(t)
	_, err := c.Exec(t.Context(), Request{Code: strings.Repeat("x", MaxPayload)}, Handlers{}, nil)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	assert.NotErrorIs(t, err, ErrClosed)
	assert.Contains(t, err.Error(), "send exec request")

	// Nothing was written: the connection goes on.
	errc := make(chan error, 1)
	go func() { errc <- c.Call(t.Context(), Request{Op: OpStatus}, nil) }()
	id, req := fa.request(t)
	assert.Equal(t, OpStatus, req.Op)
	fa.sendJSON(t, TypeReply, id, Status{})
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Call did not return")
	}
}

func TestClose(t *testing.T) {
	c, fa := newPair(t)
	errc := make(chan error, 2)
	go func() { errc <- c.Call(t.Context(), Request{Op: OpDrain}, nil) }()
	go func() {
		_, err := c.Exec(t.Context(), Request{Code: "x"}, Handlers{}, nil)
		errc <- err
	}()
	fa.request(t)
	fa.request(t)
	require.NoError(t, c.Close())
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed when Close returns")
	}
	for range 2 {
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, ErrClosed)
		case <-time.After(wait):
			t.Fatal("a call did not return after Close")
		}
	}
	assert.Empty(t, fa.rest(t))

	// Calls on a closed client fail at once, with ErrClosed.
	_, err := c.Exec(t.Context(), Request{Code: "x"}, Handlers{}, nil)
	assert.ErrorIs(t, err, ErrClosed, "exec")
	assert.ErrorIs(t, c.Call(t.Context(), Request{Op: OpStatus}, nil), ErrClosed, "call")
}

func TestServerConnSendTooLarge(t *testing.T) {
	_, fa := newPair(t)
	err := fa.sc.Send(TypeStdout, 1, make([]byte, MaxPayload+1))
	require.ErrorIs(t, err, ErrFrameTooLarge)
	err = fa.sc.SendJSON(TypeReply, 1, func() {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "encode reply frame")
}
