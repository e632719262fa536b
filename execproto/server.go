package execproto

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// ServerConn is the agent's end of a connection. Send is safe for concurrent use; Next is for
// one reading goroutine.
type ServerConn struct {
	conn io.ReadWriteCloser
	r    *bufio.Reader
	wmu  sync.Mutex
	w    *bufio.Writer
}

// NewServerConn writes hello as the connection's first frame.
func NewServerConn(conn io.ReadWriteCloser, hello Hello) (*ServerConn, error) {
	s := &ServerConn{
		conn: conn,
		r:    bufio.NewReaderSize(conn, 64<<10),
		w:    bufio.NewWriterSize(conn, 64<<10),
	}
	hello.Protocol = Version
	if err := s.SendJSON(TypeHello, 0, hello); err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	return s, nil
}

// Next reads the client's next frame.
func (s *ServerConn) Next() (Frame, error) { return ReadFrame(s.r) }

// VectorWriter is a connection that writes several buffers in one call (writev), so that a
// large frame goes out as its header and payload with no copy.
type VectorWriter interface {
	WriteVector(bufs [][]byte) error
}

// directMin is the payload size from which a frame bypasses the write buffer on a
// VectorWriter: below it, copying into the buffer costs less than a second iovec.
const directMin = 16 << 10

// Send writes one frame and flushes it: one write on the connection per frame.
func (s *ServerConn) Send(t Type, id uint32, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("write %s frame: %w (%d bytes)", t, ErrFrameTooLarge, len(payload))
	}
	var h [HeaderSize]byte
	putHeader(h[:], Frame{Type: t, ID: id, Payload: payload})
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if vw, ok := s.conn.(VectorWriter); ok && len(payload) >= directMin {
		return vw.WriteVector([][]byte{h[:], payload})
	}
	_, _ = s.w.Write(h[:]) // (a bufio.Writer's error comes back from Flush)
	_, _ = s.w.Write(payload)
	return s.w.Flush()
}

// SendJSON encodes v as the payload of one frame.
func (s *ServerConn) SendJSON(t Type, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", t, err)
	}
	return s.Send(t, id, b)
}

// SendError ends request id with an ErrorReply.
func (s *ServerConn) SendError(id uint32, code, msg string) error {
	return s.SendJSON(TypeError, id, ErrorReply{Code: code, Message: msg})
}

// Close closes the connection.
func (s *ServerConn) Close() error { return s.conn.Close() }
