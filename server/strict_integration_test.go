package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// Loose bodies are refused before anything runs: a body of null used to run an empty
// execution (recorded in the history), data after the first object was ignored, and a
// timeout of 1e30 answered "invalid timeout -2562047h...".
func TestLooseBodiesRunNothingInARealSession(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	for _, c := range []struct{ body, want string }{
		{`null`, "the body is null, not a JSON object"},
		{``, "no body"},
		{`{"code": "ran_first = 1"} {"code": "ran_second = 1"}`, "more than one JSON value"},
		{`{"code": "ran = 1", "timeout": 1e30}`, `field "timeout": duration of 1e30 seconds is over the maximum`},
		{`{"code": "ran = 1", "max_ouput": "1m"}`, `unknown field "max_ouput"`},
	} {
		st, raw := a.do("POST", "/v1/sessions/"+name+"/exec", []byte(c.body), nil)
		assert.Equal(t, http.StatusBadRequest, st, c.body)
		assert.Contains(t, errorOf(raw), c.want, c.body)
	}
	st, raw := a.do("POST", "/v1/sessions", []byte(`{"name": "`+name+`", "cpus": -1}`), nil)
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Contains(t, errorOf(raw), `field "cpus"`)

	execs, _, err := c.History(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	assert.Empty(t, execs, "no refused body ran or was recorded")
	r := a.exec(name, "'ran' in globals() or 'ran_first' in globals()")
	assert.Equal(t, "False", *r.Result)
	assert.Equal(t, int64(1), r.Seq, "the first execution is the first in the history")
}

// errorOf is the message of an error reply.
func errorOf(raw []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return string(raw)
	}
	return e.Error
}
