package proxy

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheRedactorFindsSecretsAcrossReads(t *testing.T) {
	secrets := []secret{{value: "0123456789abcdef"}, {value: "short"}}
	in := "a 0123456789abcdef b 0123456789abcdef0123456789abcdef c short"
	for _, size := range []int{1, 2, 3, 7, 16, 17, 1000} {
		r := newRedactor(io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), secrets)
		if size > 1 {
			r = newRedactor(io.NopCloser(&chunked{s: in, n: size}), secrets)
		}
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, "a "+redacted+" b "+redacted+redacted+" c short", string(b), "reads of %d", size)
	}
	assert.Equal(t, "[redacted by runtimectl egress]", redacted)
}

func TestAShortSecretIsNotRedactedFromBodies(t *testing.T) {
	body := io.NopCloser(strings.NewReader("x"))
	assert.Equal(t, body, newRedactor(body, []secret{{value: "short"}}), "no redactor at all")
}

var redacted = string(redactedText)

type chunked struct {
	s string
	n int
}

func (c *chunked) Read(b []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := min(c.n, len(b), len(c.s))
	copy(b, c.s[:n])
	c.s = c.s[n:]
	return n, nil
}
