package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"
)

// ProtocolVersion is the version of the messaging protocol this package speaks.
const ProtocolVersion = "5.3"

// Delimiter separates a message's routing identities from its signed parts.
const Delimiter = "<IDS|MSG>"

// Header is a message's header (and, in a reply, its parent header).
type Header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// Message is one Jupyter message.
type Message struct {
	// Identities route a reply on a ROUTER socket back to its requester; on iopub the first is
	// the topic.
	Identities [][]byte
	Header     Header
	// Parent is the header of the request this message answers, as the requester sent it
	// (a reply names it byte for byte); "{}" for none.
	Parent   json.RawMessage
	Metadata json.RawMessage
	Content  json.RawMessage
	Buffers  [][]byte
	// rawHeader is the header as received: what a reply's Parent is.
	rawHeader []byte
}

// RawHeader is the header as it was received (or as it will be sent), the parent header of a
// reply to m.
func (m *Message) RawHeader() json.RawMessage {
	if m.rawHeader != nil {
		return m.rawHeader
	}
	b, _ := json.Marshal(m.Header)
	return b
}

// ParentHeader decodes Parent; a message with no parent gives a zero Header.
func (m *Message) ParentHeader() Header {
	var h Header
	_ = json.Unmarshal(m.Parent, &h)
	return h
}

// Decode unmarshals the content into v.
func (m *Message) Decode(v any) error {
	if len(m.Content) == 0 {
		return nil
	}
	if err := json.Unmarshal(m.Content, v); err != nil {
		return fmt.Errorf("%s content: %w", m.Header.MsgType, err)
	}
	return nil
}

// NewID returns a fresh message id (32 hex digits, as a UUID without dashes).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Now is the time as a header's date: ISO 8601 with microseconds, UTC.
func Now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }

// Signer signs and verifies messages with the connection's key and scheme.
type Signer struct {
	key []byte
	h   func() hash.Hash
}

// NewSigner returns the signer for a connection file's key and signature_scheme (hmac-sha256,
// as Jupyter writes them; hmac-sha1 and hmac-sha512 too). An empty key means unsigned messages.
func NewSigner(scheme, key string) (Signer, error) {
	s := Signer{key: []byte(key)}
	switch strings.ToLower(scheme) {
	case "", "hmac-sha256":
		s.h = sha256.New
	case "hmac-sha1":
		s.h = sha1.New
	case "hmac-sha512":
		s.h = sha512.New
	default:
		return Signer{}, fmt.Errorf("signature scheme %q: use hmac-sha256", scheme)
	}
	return s, nil
}

// Sign returns the hex HMAC of the four signed parts, "" when there is no key.
func (s Signer) Sign(header, parent, metadata, content []byte) string {
	if len(s.key) == 0 {
		return ""
	}
	mac := hmac.New(s.h, s.key)
	for _, p := range [][]byte{header, parent, metadata, content} {
		mac.Write(p)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig signs the parts (in constant time); with no key every message
// verifies.
func (s Signer) Verify(sig, header, parent, metadata, content []byte) bool {
	if len(s.key) == 0 {
		return true
	}
	want := s.Sign(header, parent, metadata, content)
	return hmac.Equal([]byte(want), bytes.ToLower(sig))
}

// Errors of Parse.
var (
	ErrNoDelimiter  = errors.New("no <IDS|MSG> delimiter")
	ErrShort        = errors.New("fewer than the five parts after the delimiter")
	ErrBadSignature = errors.New("signature does not verify")
)

// Parse reads the frames of one message, checking its signature.
func Parse(frames [][]byte, s Signer) (*Message, error) {
	i := 0
	for i < len(frames) && string(frames[i]) != Delimiter {
		i++
	}
	if i == len(frames) {
		return nil, ErrNoDelimiter
	}
	rest := frames[i+1:]
	if len(rest) < 5 {
		return nil, ErrShort
	}
	sig, header, parent, metadata, content := rest[0], rest[1], rest[2], rest[3], rest[4]
	if !s.Verify(sig, header, parent, metadata, content) {
		return nil, ErrBadSignature
	}
	m := &Message{
		Identities: cloneAll(frames[:i]),
		Parent:     clone(orEmpty(parent)),
		Metadata:   clone(orEmpty(metadata)),
		Content:    clone(orEmpty(content)),
		Buffers:    cloneAll(rest[5:]),
		rawHeader:  clone(header),
	}
	if err := json.Unmarshal(header, &m.Header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if m.Header.MsgType == "" {
		return nil, errors.New("header: no msg_type")
	}
	return m, nil
}

// Frames returns the frames of m, signed.
func (m *Message) Frames(s Signer) [][]byte {
	header := m.RawHeader()
	parent, metadata, content := orEmpty(m.Parent), orEmpty(m.Metadata), orEmpty(m.Content)
	out := make([][]byte, 0, len(m.Identities)+6+len(m.Buffers))
	out = append(out, m.Identities...)
	out = append(out, []byte(Delimiter), []byte(s.Sign(header, parent, metadata, content)), header, parent, metadata, content)
	return append(out, m.Buffers...)
}

func orEmpty(b []byte) []byte {
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}")
	}
	return b
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func cloneAll(bs [][]byte) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = clone(b)
	}
	return out
}

// Reply builds a message of type msgType in reply to parent (nil: none), in session, with
// content (marshalled to JSON; a json.RawMessage is used as is).
func Reply(parent *Message, session, msgType string, content any) (*Message, error) {
	c, err := marshal(content)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", msgType, err)
	}
	m := &Message{
		Header:   Header{MsgID: NewID(), Session: session, Username: "kernel", Date: Now(), MsgType: msgType, Version: ProtocolVersion},
		Parent:   json.RawMessage("{}"),
		Metadata: json.RawMessage("{}"),
		Content:  c,
	}
	if parent != nil {
		m.Parent = parent.RawHeader()
		m.Identities = parent.Identities
	}
	return m, nil
}

func marshal(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}
