package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The relay (`runtime-agent connect`, run by docker exec or pods/exec) takes itself out of the
// data path: its first message on the agent's socket is one byte, handoffFDs, carrying its
// standard input and output (the client's stream) as SCM_RIGHTS, and the agent reads and
// writes that stream itself. The relay then only waits for the agent to close the socket, and
// exits (which ends the exec). Bytes go engine → agent and agent → engine with no process in
// between. Where descriptors cannot be passed, the first byte is handoffCopy and the relay
// copies the bytes as before.
const (
	handoffFDs  byte = 'F'
	handoffCopy byte = 'C'
)

// handoffWait bounds how long the agent waits for a new connection's first message.
const handoffWait = 30 * time.Second

// The pipes keep their default size: a larger one (F_SETPIPE_SZ) is counted against the pipe
// quota of its user (fs.pipe-user-pages-soft, 64 MiB), and every session's agent is the same
// root user without CAP_SYS_RESOURCE: past that quota, over the whole host, each new pipe such a
// process makes gets two pages.

// accept reads a new connection's first message and returns the stream to speak the protocol
// on: the relay's descriptors, or the connection itself when the relay copies.
func accept(c net.Conn) (io.ReadWriteCloser, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c, nil
	}
	_ = uc.SetReadDeadline(time.Now().Add(handoffWait))
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(2*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	if err != nil {
		return nil, fmt.Errorf("read the relay's first message: %w", err)
	}
	_ = uc.SetReadDeadline(time.Time{})
	fds, ferr := parseRights(oob[:oobn])
	if n != 1 || b[0] != handoffFDs {
		closeAll(fds)
		if n == 1 && b[0] == handoffCopy {
			return uc, nil
		}
		return nil, errors.New("the relay's first message is neither a hand-off nor a copy")
	}
	if ferr != nil || len(fds) != 2 {
		closeAll(fds)
		return nil, fmt.Errorf("the relay's hand-off carries %d descriptors (%v)", len(fds), ferr)
	}
	return newFDConn(fds[0], fds[1], uc), nil
}

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

// fdConn is a client's stream as the relay's descriptors: reads from its standard input,
// writes to its standard output. Closing it closes both and the relay's socket, which ends
// the relay; the relay's end (its death) closes it too.
type fdConn struct {
	r, w *os.File
	uc   *net.UnixConn
	once sync.Once
}

func newFDConn(in, out int, uc *net.UnixConn) *fdConn {
	// Non-blocking, so that the files are on Go's poller: a Close wakes a blocked Read.
	_ = syscall.SetNonblock(in, true)
	_ = syscall.SetNonblock(out, true)
	fc := &fdConn{r: os.NewFile(uintptr(in), "relay-stdin"), w: os.NewFile(uintptr(out), "relay-stdout"), uc: uc}
	go func() {
		// The relay sends nothing more; a read returns when it dies or the socket is closed.
		var b [64]byte
		for {
			if _, err := uc.Read(b[:]); err != nil {
				fc.Close()
				return
			}
		}
	}()
	return fc
}

func (c *fdConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *fdConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *fdConn) Close() error {
	c.once.Do(func() {
		_ = c.r.Close()
		_ = c.w.Close()
		_ = c.uc.Close()
	})
	return nil
}

// Connect joins a client's stream (this process's standard input and output, made by docker
// exec) to the agent on its socket: it hands both descriptors to the agent and waits until the
// agent is done with them. Where they cannot be handed over, it copies the bytes both ways.
func Connect(socket string, stdin, stdout *os.File) error {
	var (
		c   net.Conn
		err error
	)
	// The agent may still be starting (restoring a large snapshot): wait for its socket.
	for i := 0; i < 600; i++ {
		c, err = net.Dial("unix", socket)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("connect to the agent: %w", err)
	}
	uc := c.(*net.UnixConn)
	defer uc.Close()
	rights := syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()))
	if _, _, err := uc.WriteMsgUnix([]byte{handoffFDs}, rights, nil); err == nil {
		// The agent has its own copies: ours would only keep the stream open.
		_ = stdin.Close()
		_ = stdout.Close()
		_, err = io.Copy(io.Discard, uc) // until the agent closes the socket
		return err
	}
	if _, err := uc.Write([]byte{handoffCopy}); err != nil {
		return fmt.Errorf("connect to the agent: %w", err)
	}
	return relayCopy(uc, stdin, stdout)
}

// relayCopy relays stdin and stdout to the agent's socket until either side ends.
func relayCopy(uc *net.UnixConn, stdin io.Reader, stdout io.Writer) error {
	done := make(chan error, 2)
	go func() {
		_, err := copyPlain(uc, stdin)
		_ = uc.CloseWrite()
		done <- err
	}()
	go func() {
		_, err := copyPlain(stdout, uc)
		done <- err
	}()
	err := <-done
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// WriteVector writes bufs to the stream's output with writev, as one frame (execproto's
// VectorWriter): no copy of a large payload into a write buffer.
func (c *fdConn) WriteVector(bufs [][]byte) error {
	rc, err := c.w.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs)
			if err == unix.EAGAIN {
				return false // wait until the pipe has room, then go on
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				werr = err
				return true
			}
			for n > 0 && len(bufs) > 0 {
				if n >= len(bufs[0]) {
					n -= len(bufs[0])
					bufs = bufs[1:]
				} else {
					bufs[0] = bufs[0][n:]
					n = 0
				}
			}
			for len(bufs) > 0 && len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return werr
}
