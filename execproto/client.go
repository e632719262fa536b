package execproto

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/runtimectl/runtimectl/contract"
)

// ErrClosed is returned by calls on a client whose connection has ended. When the connection
// ended during an execution, the execution's fate is unknown to this client (the container may
// have died); the agent records it in the history either way.
var ErrClosed = errors.New("connection to the session's agent closed")

// ErrBusy is a request the agent refused because its queue is full; errors.Is finds it in a
// RemoteError with code "busy".
var ErrBusy = errors.New("the session is busy")

// ErrDiskCap is an execution the agent refused because the session's workspace is past its
// disk cap; errors.Is finds it in a RemoteError with code contract.DiskCapCode.
var ErrDiskCap = errors.New("the session's workspace is past its disk cap")

// RemoteError is a request that the agent refused or failed as a whole.
type RemoteError struct {
	Op string
	ErrorReply
}

func (e *RemoteError) Error() string { return e.Op + ": " + e.Message }

// Is makes errors.Is(err, ErrBusy) true for a refusal of a full queue, and errors.Is(err,
// ErrDiskCap) for a refusal of a workspace past its disk cap.
func (e *RemoteError) Is(target error) bool {
	return target == ErrBusy && e.Code == "busy" || target == ErrDiskCap && e.Code == contract.DiskCapCode
}

// Handlers receive an execution's events while it runs. Each may be nil; a Display handler
// asks the agent for the execution's displays (Request.Displays), which also land in
// Result.Displays. They are called from
// the goroutine that called Exec, one at a time and in order; a slow handler slows the stream.
type Handlers struct {
	Stdout  func(p []byte)
	Stderr  func(p []byte)
	Notice  func(msg string)
	Display func(d Display)
}

// Client is the controller's end of a connection. It is safe for concurrent use: calls are
// multiplexed by request id over the one connection.
type Client struct {
	conn  io.ReadWriteCloser
	hello Hello

	closeOnce sync.Once
	closeConn error // what conn.Close returned

	wmu sync.Mutex // serialises frame writes
	w   *bufio.Writer

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]*call
	closed  chan struct{}
	err     error // why the connection closed, set before closed is closed
}

// NewClient reads the agent's Hello from conn, checks the protocol version, and starts the
// reader goroutine, which lives until conn ends or Close is called.
func NewClient(ctx context.Context, conn io.ReadWriteCloser) (*Client, error) {
	type helloResult struct {
		f   Frame
		err error
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	ch := make(chan helloResult, 1)
	go func() {
		f, err := ReadFrame(br)
		ch <- helloResult{f, err}
	}()
	var hr helloResult
	select {
	case hr = <-ch:
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("wait for the agent's hello: %w", ctx.Err())
	}
	if hr.err != nil {
		conn.Close()
		return nil, fmt.Errorf("read the agent's hello: %w", hr.err)
	}
	if hr.f.Type != TypeHello {
		conn.Close()
		return nil, fmt.Errorf("read the agent's hello: got a %s frame first", hr.f.Type)
	}
	var h Hello
	if err := json.Unmarshal(hr.f.Payload, &h); err != nil {
		conn.Close()
		return nil, fmt.Errorf("decode the agent's hello: %w", err)
	}
	if h.Protocol != Version {
		conn.Close()
		return nil, fmt.Errorf("the session's agent speaks protocol %d, this runtimectl speaks %d: rebuild the session's image with this runtimectl and restart the session", h.Protocol, Version)
	}
	c := &Client{
		conn:    conn,
		hello:   h,
		w:       bufio.NewWriterSize(conn, 64<<10),
		pending: make(map[uint32]*call),
		closed:  make(chan struct{}),
	}
	go c.readLoop(br)
	return c, nil
}

// Hello returns the agent's greeting.
func (c *Client) Hello() Hello { return c.hello }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.closed }

// Close ends the connection. Executions that are running go on in the agent.
func (c *Client) Close() error {
	err := c.closeConnOnce()
	<-c.closed
	return err
}

// closeConnOnce closes conn the first time it is called, by Close or by the reader when the
// stream ends or breaks (a peer that sends a malformed frame is not read any further, so it
// must not be left blocked writing to us).
func (c *Client) closeConnOnce() error {
	c.closeOnce.Do(func() { c.closeConn = c.conn.Close() })
	return c.closeConn
}

func (c *Client) readLoop(r io.Reader) {
	var err error
	for {
		var f Frame
		f, err = ReadFrame(r)
		if err != nil {
			break
		}
		c.mu.Lock()
		cl := c.pending[f.ID]
		c.mu.Unlock()
		if cl != nil {
			select {
			case cl.ch <- f:
			case <-cl.gone:
			}
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %v", ErrClosed, err)
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	_ = c.closeConnOnce()
	close(c.closed)
}

func (c *Client) closeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

// call is one request in flight: the reader goroutine delivers its frames to ch until the
// caller closes gone.
type call struct {
	ch   chan Frame
	gone chan struct{}
}

func (c *Client) register() (uint32, chan Frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	cl := &call{ch: make(chan Frame, 256), gone: make(chan struct{})}
	c.pending[c.nextID] = cl
	return c.nextID, cl.ch
}

func (c *Client) unregister(id uint32) {
	c.mu.Lock()
	if cl := c.pending[id]; cl != nil {
		close(cl.gone)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// send writes one frame. A frame too large is refused before anything is written; any other
// failure means the connection is broken, and the error wraps ErrClosed.
func (c *Client) send(f Frame) error {
	if len(f.Payload) > MaxPayload {
		return WriteFrame(c.w, f) // refuses it, writes nothing
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := WriteFrame(c.w, f)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return nil
}

func (c *Client) sendRequest(id uint32, req Request) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", req.Op, err)
	}
	if err := c.send(Frame{Type: TypeRequest, ID: id, Payload: payload}); err != nil {
		return fmt.Errorf("send %s request: %w", req.Op, err)
	}
	return nil
}

// Exec runs req (Op is set to OpExec) and streams its output to h until the Result arrives.
// Cancelling ctx interrupts the code: the agent stops it (status interrupted) and Exec still
// returns its Result, so the caller learns what happened. If detach is closed or the connection
// ends before the Result, Exec returns an error; the execution goes on or ends in the agent and
// lands in the history either way.
func (c *Client) Exec(ctx context.Context, req Request, h Handlers, detach <-chan struct{}) (*Result, error) {
	req.Op = OpExec
	if h.Display != nil {
		req.Displays = true
	}
	id, ch := c.register()
	defer c.unregister(id)
	if err := c.sendRequest(id, req); err != nil {
		return nil, err
	}
	var displays []Display
	// handle passes one frame on; final is true for the frame that ends the execution.
	handle := func(f Frame) (res *Result, final bool, err error) {
		switch f.Type {
		case TypeDisplay:
			var d Display
			if json.Unmarshal(f.Payload, &d) == nil {
				displays = append(displays, d)
				if h.Display != nil {
					h.Display(d)
				}
			}
		case TypeStdout:
			if h.Stdout != nil {
				h.Stdout(f.Payload)
			}
		case TypeStderr:
			if h.Stderr != nil {
				h.Stderr(f.Payload)
			}
		case TypeNotice:
			var n Notice
			if json.Unmarshal(f.Payload, &n) == nil && h.Notice != nil {
				h.Notice(n.Message)
			}
		case TypeResult:
			var res Result
			if err := json.Unmarshal(f.Payload, &res); err != nil {
				return nil, true, fmt.Errorf("decode result: %w", err)
			}
			res.Displays = displays
			return &res, true, nil
		case TypeError:
			return nil, true, decodeRemoteError(OpExec, f.Payload)
		}
		return nil, false, nil
	}
	interrupted := false
	ctxDone := ctx.Done()
	for {
		select {
		case f := <-ch:
			if res, final, err := handle(f); final {
				return res, err
			}
		case <-ctxDone:
			if !interrupted {
				interrupted = true
				if err := c.send(Frame{Type: TypeInterrupt, ID: id}); err != nil {
					return nil, fmt.Errorf("interrupt: %w", err)
				}
			}
			ctxDone = nil
		case <-detach:
			return nil, fmt.Errorf("detached: %w", context.Canceled)
		case <-c.closed:
			// The reader put every frame that arrived before the end into ch before it closed
			// c.closed: deliver them first, the final one included.
			for {
				select {
				case f := <-ch:
					if res, final, err := handle(f); final {
						return res, err
					}
					continue
				default:
				}
				return nil, c.closeErr()
			}
		}
	}
}

// Call sends a request that is not an exec and decodes its Reply into reply (which may be nil).
func (c *Client) Call(ctx context.Context, req Request, reply any) error {
	id, ch := c.register()
	defer c.unregister(id)
	if err := c.sendRequest(id, req); err != nil {
		return err
	}
	// handle returns final true for the frame that ends the call.
	handle := func(f Frame) (final bool, err error) {
		switch f.Type {
		case TypeReply:
			if reply == nil {
				return true, nil
			}
			if err := json.Unmarshal(f.Payload, reply); err != nil {
				return true, fmt.Errorf("decode %s reply: %w", req.Op, err)
			}
			return true, nil
		case TypeError:
			return true, decodeRemoteError(req.Op, f.Payload)
		}
		return false, nil
	}
	for {
		select {
		case f := <-ch:
			if final, err := handle(f); final {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", req.Op, ctx.Err())
		case <-c.closed:
			for {
				select {
				case f := <-ch:
					if final, err := handle(f); final {
						return err
					}
					continue
				default:
				}
				return c.closeErr()
			}
		}
	}
}

func decodeRemoteError(op string, payload []byte) error {
	var e ErrorReply
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("%s: decode error reply: %w", op, err)
	}
	return &RemoteError{Op: op, ErrorReply: e}
}
