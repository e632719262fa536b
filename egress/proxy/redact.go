package proxy

import (
	"bytes"
	"io"
)

// minRedacted is the shortest secret value redacted from response bodies: a shorter one would
// match ordinary content too often.
const minRedacted = 8

var redactedText = []byte("[redacted by runtimectl egress]")

// redactor replaces secret values in a stream, holding back the bytes at the end of what it
// has read that could begin one, until the next read says.
type redactor struct {
	src     io.ReadCloser
	secrets [][]byte
	keep    int    // the longest secret, less one
	pending []byte // read, not yet passed on
	out     []byte // redacted, ready
	err     error
}

func newRedactor(body io.ReadCloser, secrets []secret) io.ReadCloser {
	r := &redactor{src: body}
	for _, s := range secrets {
		if len(s.value) >= minRedacted {
			r.secrets = append(r.secrets, []byte(s.value))
			r.keep = max(r.keep, len(s.value)-1)
		}
	}
	if len(r.secrets) == 0 {
		return body
	}
	return r
}

func (r *redactor) Read(b []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			if len(r.pending) > 0 {
				r.out, r.pending = r.pending, nil
				break
			}
			return 0, r.err
		}
		buf := make([]byte, 32<<10)
		n, err := r.src.Read(buf)
		r.pending = append(r.pending, buf[:n]...)
		r.err = err
		for _, s := range r.secrets {
			r.pending = bytes.ReplaceAll(r.pending, s, redactedText)
		}
		if r.err == nil && len(r.pending) > r.keep {
			cut := len(r.pending) - r.keep
			r.out = append(r.out, r.pending[:cut]...)
			r.pending = append([]byte(nil), r.pending[cut:]...)
		}
	}
	n := copy(b, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *redactor) Close() error { return r.src.Close() }
