package jupyter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSignMatchesJupyterClient(t *testing.T) {
	// jupyter_client.session.Session(key=b"secret-key").sign([...]) of these four parts.
	s, err := NewSigner("hmac-sha256", "secret-key")
	require.NoError(t, err)
	got := s.Sign([]byte(`{"msg_id":"a"}`), []byte(`{}`), []byte(`{}`), []byte(`{"code":"1"}`))
	assert.Equal(t, "5d36b293e5c458d7f35ffeb808fd982decee51d5d55aa707a0cf9c6b99e2c0a9", got)
	assert.True(t, s.Verify([]byte(got), []byte(`{"msg_id":"a"}`), []byte(`{}`), []byte(`{}`), []byte(`{"code":"1"}`)))
	assert.False(t, s.Verify([]byte(got), []byte(`{"msg_id":"b"}`), []byte(`{}`), []byte(`{}`), []byte(`{"code":"1"}`)))
}

func TestSignerSchemes(t *testing.T) {
	for _, scheme := range []string{"", "hmac-sha256", "HMAC-SHA256", "hmac-sha1", "hmac-sha512"} {
		_, err := NewSigner(scheme, "k")
		assert.NoError(t, err, scheme)
	}
	_, err := NewSigner("md5", "k")
	assert.ErrorContains(t, err, "hmac-sha256")
}

func TestUnsignedWithoutKey(t *testing.T) {
	s, err := NewSigner("hmac-sha256", "")
	require.NoError(t, err)
	assert.Equal(t, "", s.Sign([]byte("a"), nil, nil, nil))
	assert.True(t, s.Verify([]byte("anything"), []byte("a"), nil, nil, nil))
}

func frames(parts ...string) [][]byte {
	out := make([][]byte, len(parts))
	for i, p := range parts {
		out[i] = []byte(p)
	}
	return out
}

func TestParseKeepsIdentitiesAndRawHeader(t *testing.T) {
	s, _ := NewSigner("hmac-sha256", "key")
	header := `{"msg_id":"m1","session":"s1","username":"u","date":"2026-01-01T00:00:00Z","msg_type":"execute_request","version":"5.3"}`
	content := `{"code":"print(1)","silent":false}`
	sig := s.Sign([]byte(header), []byte(`{}`), []byte(`{}`), []byte(content))
	m, err := Parse(frames("id1", "id2", Delimiter, sig, header, `{}`, `{}`, content, "buf"), s)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("id1"), []byte("id2")}, m.Identities)
	assert.Equal(t, "execute_request", m.Header.MsgType)
	assert.Equal(t, header, string(m.RawHeader()))
	assert.Equal(t, [][]byte{[]byte("buf")}, m.Buffers)
	var req ExecuteRequest
	require.NoError(t, m.Decode(&req))
	assert.Equal(t, "print(1)", req.Code)

	r, err := Reply(m, "kern", "execute_reply", map[string]int{"execution_count": 1})
	require.NoError(t, err)
	assert.Equal(t, header, string(r.Parent), "a reply's parent is the request's header byte for byte")
	assert.Equal(t, m.Identities, r.Identities, "a reply goes back to its requester")
	assert.Equal(t, ProtocolVersion, r.Header.Version)
	assert.Equal(t, "m1", r.ParentHeader().MsgID)
}

func TestParseRefuses(t *testing.T) {
	s, _ := NewSigner("hmac-sha256", "key")
	header := `{"msg_id":"m1","msg_type":"kernel_info_request"}`
	good := s.Sign([]byte(header), []byte(`{}`), []byte(`{}`), []byte(`{}`))
	for name, tc := range map[string]struct {
		frames [][]byte
		err    error
	}{
		"no delimiter":    {frames("id", good, header, "{}", "{}", "{}"), ErrNoDelimiter},
		"too short":       {frames(Delimiter, good, header, "{}"), ErrShort},
		"bad signature":   {frames(Delimiter, "00"+good[2:], header, "{}", "{}", "{}"), ErrBadSignature},
		"tampered header": {frames(Delimiter, good, `{"msg_id":"m2","msg_type":"kernel_info_request"}`, "{}", "{}", "{}"), ErrBadSignature},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tc.frames, s)
			assert.ErrorIs(t, err, tc.err)
		})
	}
	t.Run("no msg_type", func(t *testing.T) {
		h := `{"msg_id":"m1"}`
		_, err := Parse(frames(Delimiter, s.Sign([]byte(h), []byte(`{}`), []byte(`{}`), []byte(`{}`)), h, "{}", "{}", "{}"), s)
		assert.ErrorContains(t, err, "msg_type")
	})
	t.Run("header not JSON", func(t *testing.T) {
		h := `nope`
		_, err := Parse(frames(Delimiter, s.Sign([]byte(h), []byte(`{}`), []byte(`{}`), []byte(`{}`)), h, "{}", "{}", "{}"), s)
		assert.ErrorContains(t, err, "header")
	})
}

func TestFramesRoundTrip(t *testing.T) {
	s, _ := NewSigner("hmac-sha256", "k")
	m, err := Reply(nil, "sess", "stream", map[string]string{"name": "stdout", "text": "hi\n"})
	require.NoError(t, err)
	m.Identities = [][]byte{[]byte("topic")}
	f := m.Frames(s)
	assert.Equal(t, "topic", string(f[0]))
	assert.Equal(t, Delimiter, string(f[1]))
	back, err := Parse(f, s)
	require.NoError(t, err)
	assert.Equal(t, m.Header, back.Header)
	assert.JSONEq(t, `{}`, string(back.Parent), "no parent is an empty object")
	assert.JSONEq(t, `{"name":"stdout","text":"hi\n"}`, string(back.Content))
}

func TestReadConnectionFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kernel-1.json")
	c := ConnectionInfo{IP: "127.0.0.1", Transport: "tcp", ShellPort: 1, IOPubPort: 2, StdinPort: 3, ControlPort: 4, HBPort: 5, Key: "k", SignatureScheme: "hmac-sha256", KernelName: "runtimectl-python"}
	b, _ := json.Marshal(c)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	got, err := ReadConnectionFile(p)
	require.NoError(t, err)
	assert.Equal(t, c, got)
	assert.Equal(t, "tcp://127.0.0.1:4", got.Endpoint(got.ControlPort))

	got.Transport = "ipc"
	got.IP = "/tmp/kernel-1"
	assert.Equal(t, "ipc:///tmp/kernel-1-4", got.Endpoint(4))
	got.Transport, got.IP = "tcp", "::1"
	assert.Equal(t, "tcp://[::1]:4", got.Endpoint(4))
	got.IP = "0.0.0.0"
	assert.Equal(t, "tcp://*:4", got.Endpoint(4))

	bad := c
	bad.HBPort = 0
	b, _ = json.Marshal(bad)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	_, err = ReadConnectionFile(p)
	assert.ErrorContains(t, err, "hb_port")
	bad = c
	bad.SignatureScheme = "rot13"
	b, _ = json.Marshal(bad)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	_, err = ReadConnectionFile(p)
	assert.ErrorContains(t, err, "rot13")
	_, err = ReadConnectionFile(filepath.Join(dir, "none.json"))
	assert.Error(t, err)
}

func FuzzParse(f *testing.F) {
	s, _ := NewSigner("hmac-sha256", "")
	f.Add([]byte(`{"msg_id":"a","msg_type":"execute_request"}`), []byte(`{}`), []byte(`{"code":"1"}`))
	f.Fuzz(func(t *testing.T, header, parent, content []byte) {
		m, err := Parse([][]byte{[]byte(Delimiter), nil, header, parent, []byte("{}"), content}, s)
		if err != nil {
			return
		}
		back, err := Parse(m.Frames(s), s)
		if err != nil {
			t.Fatalf("a parsed message does not parse again: %v", err)
		}
		if back.Header != m.Header {
			t.Fatalf("header changed: %+v != %+v", back.Header, m.Header)
		}
	})
}

func TestIsCompleteReplyHasAnIndentWhenIncompleteOnly(t *testing.T) {
	for _, tc := range []struct {
		reply IsCompleteReply
		want  string
	}{
		{IsCompleteReply{Status: "incomplete"}, `{"status":"incomplete","indent":""}`},
		{IsCompleteReply{Status: "incomplete", Indent: "    "}, `{"status":"incomplete","indent":"    "}`},
		{IsCompleteReply{Status: "complete"}, `{"status":"complete"}`},
		{IsCompleteReply{Status: "invalid", Indent: "  "}, `{"status":"invalid"}`},
	} {
		b, err := json.Marshal(tc.reply)
		require.NoError(t, err)
		assert.JSONEq(t, tc.want, string(b))
	}
}
