package execproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version stated in the Hello frame. A client refuses an agent that
// speaks another version, with a message that says to rebuild the images.
const Version = 1

// HeaderSize is the size of a frame header in bytes.
const HeaderSize = 9

// MaxPayload bounds a frame's payload. Output is sent in chunks far below it; a peer that
// announces more is broken or hostile and the connection is closed.
const MaxPayload = 16 << 20

// Type says what a frame carries.
type Type byte

// The frame types. Hello, Stdout, Stderr, Result, Reply, Error and Notice go from the agent to
// the client; Request and Interrupt from the client to the agent.
const (
	TypeHello     Type = 1 // JSON Hello
	TypeRequest   Type = 2 // JSON Request
	TypeStdout    Type = 3 // raw bytes the code wrote to its standard output
	TypeStderr    Type = 4 // raw bytes the code wrote to its standard error
	TypeResult    Type = 5 // JSON Result: the end of an exec request
	TypeReply     Type = 6 // JSON reply to a request that is not an exec
	TypeError     Type = 7 // JSON ErrorReply: the request failed as a whole
	TypeInterrupt Type = 8 // interrupt the execution with the frame's id; no payload
	TypeNotice    Type = 9 // JSON Notice: something the person should know, for stderr
)

func (t Type) String() string {
	switch t {
	case TypeHello:
		return "hello"
	case TypeRequest:
		return "request"
	case TypeStdout:
		return "stdout"
	case TypeStderr:
		return "stderr"
	case TypeResult:
		return "result"
	case TypeReply:
		return "reply"
	case TypeError:
		return "error"
	case TypeInterrupt:
		return "interrupt"
	case TypeNotice:
		return "notice"
	case TypeDisplay:
		return "display"
	}
	return fmt.Sprintf("type(%d)", byte(t))
}

func (t Type) valid() bool { return t >= TypeHello && t <= TypeDisplay }

// Frame is one unit on the wire.
type Frame struct {
	Type    Type
	ID      uint32
	Payload []byte
}

// ErrFrameTooLarge is returned for a frame whose payload exceeds MaxPayload.
var ErrFrameTooLarge = errors.New("frame too large")

// ErrBadFrame is returned for a header with an unknown type.
var ErrBadFrame = errors.New("malformed frame")

// AppendFrame appends the encoding of f to buf and returns the extended buffer.
func AppendFrame(buf []byte, f Frame) []byte {
	var h [HeaderSize]byte
	putHeader(h[:], f)
	buf = append(buf, h[:]...)
	return append(buf, f.Payload...)
}

func putHeader(h []byte, f Frame) {
	binary.BigEndian.PutUint32(h[0:4], uint32(len(f.Payload)))
	h[4] = byte(f.Type)
	binary.BigEndian.PutUint32(h[5:9], f.ID)
}

// WriteFrame writes f to w in a single Write call, so that concurrent writers that serialise
// their calls never interleave a frame.
func WriteFrame(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxPayload {
		return fmt.Errorf("write %s frame: %w (%d bytes)", f.Type, ErrFrameTooLarge, len(f.Payload))
	}
	_, err := w.Write(AppendFrame(make([]byte, 0, HeaderSize+len(f.Payload)), f))
	return err
}

// ReadFrame reads one frame from r. It returns io.EOF only when the stream ends cleanly between
// frames; a stream that ends inside a frame is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	t := Type(h[4])
	if !t.valid() {
		return Frame{}, fmt.Errorf("read frame: %w: unknown type %d", ErrBadFrame, h[4])
	}
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("read %s frame: %w (%d bytes)", t, ErrFrameTooLarge, n)
	}
	f := Frame{Type: t, ID: binary.BigEndian.Uint32(h[5:9])}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, fmt.Errorf("read %s frame: %w", t, err)
		}
	}
	return f, nil
}
