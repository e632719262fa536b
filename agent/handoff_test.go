package agent

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoAgent accepts one connection on a socket as Serve does and echoes what arrives on the
// stream it gets, until the stream ends; then it closes the stream.
func echoAgent(t *testing.T, ln net.Listener) <-chan io.ReadWriteCloser {
	got := make(chan io.ReadWriteCloser, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		rw, err := accept(c)
		if err != nil {
			c.Close()
			close(got)
			return
		}
		got <- rw
		_, _ = io.Copy(rw, rw)
		rw.Close()
	}()
	return got
}

func TestConnectHandsTheStreamToTheAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got := echoAgent(t, ln)

	// The client's stream as docker exec gives it to the relay: two pipes.
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- Connect(sock, inR, outW) }()

	rw := <-got
	require.NotNil(t, rw)
	_, isFD := rw.(*fdConn)
	assert.True(t, isFD, "the agent got the relay's descriptors, not a relayed socket")

	msg := bytes.Repeat([]byte("frame "), 50000) // more than a pipe holds
	go func() { _, _ = inW.Write(msg) }()
	back := make([]byte, len(msg))
	_, err = io.ReadFull(outR, back)
	require.NoError(t, err)
	assert.Equal(t, msg, back)

	// The client ends its stream: the agent closes its end, and the relay returns.
	require.NoError(t, inW.Close())
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not return after the agent closed the stream")
	}
	n, err := outR.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "nothing else holds the stream's output open")
}

func TestAgentStillServesARelayThatCopies(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got := echoAgent(t, ln)

	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte{handoffCopy})
	require.NoError(t, err)
	require.NotNil(t, <-got)
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	b := make([]byte, 5)
	_, err = io.ReadFull(c, b)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
}

func TestAgentDropsAConnectionWithABadFirstMessage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got := echoAgent(t, ln)

	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte{handoffFDs}) // says descriptors, carries none
	require.NoError(t, err)
	_, ok := <-got
	assert.False(t, ok)
}

func TestLargeFramesGoOutWholeOnAHandedOverStream(t *testing.T) {
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	defer inW.Close()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	a, b, err := unixPair()
	require.NoError(t, err)
	defer b.Close()
	in, err := syscall.Dup(int(inR.Fd()))
	require.NoError(t, err)
	out, err := syscall.Dup(int(outW.Fd()))
	require.NoError(t, err)
	inR.Close()
	outW.Close()
	fc := newFDConn(in, out, a)
	defer fc.Close()

	sc, err := execproto.NewServerConn(fc, execproto.Hello{})
	require.NoError(t, err)
	big := bytes.Repeat([]byte{'x'}, 3<<20)
	go func() {
		_ = sc.Send(execproto.TypeStdout, 7, big)
		_ = sc.Send(execproto.TypeStdout, 7, []byte("small"))
	}()
	f, err := execproto.ReadFrame(outR)
	require.NoError(t, err)
	assert.Equal(t, execproto.TypeHello, f.Type)
	f, err = execproto.ReadFrame(outR)
	require.NoError(t, err)
	assert.Equal(t, uint32(7), f.ID)
	assert.Equal(t, big, f.Payload)
	f, err = execproto.ReadFrame(outR)
	require.NoError(t, err)
	assert.Equal(t, "small", string(f.Payload))
}

func unixPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err := conn(fds[0])
	if err != nil {
		return nil, nil, err
	}
	b, err := conn(fds[1])
	return a, b, err
}
