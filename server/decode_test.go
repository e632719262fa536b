package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A body is one JSON object of the route's fields, each in its range; every refusal is a 400
// that names what is wrong, on one line.
func TestBodiesAreDecodedStrictly(t *testing.T) {
	s := newUnitServer(t)
	for _, c := range []struct{ name, path, body, want string }{
		{"null", "/v1/sessions/x/exec", `null`, "the body is null, not a JSON object"},
		{"null start", "/v1/sessions", ` null `, "the body is null"},
		{"array", "/v1/sessions/x/exec", `[{"code": "1"}]`, "an array, not a JSON object"},
		{"number", "/v1/sessions/x/exec", `7`, "the number 7, not a JSON object"},
		{"no body", "/v1/sessions/x/exec", ``, "no body"},
		{"empty object", "/v1/sessions/x/exec", `{}`, `"code" is missing`},
		{"two objects", "/v1/sessions/x/exec", `{"code": "1"} {"code": "2"}`, "more than one JSON value"},
		{"trailing junk", "/v1/sessions/x/exec", `{"code": "1"}x`, "more than one JSON value"},
		{"unknown fields", "/v1/sessions/x/exec", `{"code": "1", "tmeout": 3, "zz": 1}`, `unknown fields "tmeout", "zz" (the fields are code, env`},
		{"unknown start field", "/v1/sessions", `{"nmae": "x"}`, `unknown field "nmae"`},
		{"wrong type", "/v1/sessions/x/exec", `{"code": 12}`, `field "code": the number 12 is not a string`},
		{"huge timeout", "/v1/sessions/x/exec", `{"code": "1", "timeout": 1e30}`, `field "timeout": duration of 1e30 seconds is over the maximum of 31536000 seconds (a year)`},
		{"huge timeout string", "/v1/sessions/x/exec", `{"code": "1", "timeout": "9000h"}`, `over the maximum of 8760h0m0s (a year)`},
		{"negative timeout", "/v1/sessions/x/exec", `{"code": "1", "timeout": -1}`, `field "timeout": duration -1 is negative`},
		{"tiny timeout", "/v1/sessions/x/exec", `{"code": "1", "timeout": 1e-9}`, `under 1ms`},
		{"huge size", "/v1/sessions/x/exec", `{"code": "1", "max_output": 1e30}`, `field "max_output": size 1e30 is over the maximum`},
		{"fractional size", "/v1/sessions/x/exec", `{"code": "1", "max_output": 1.5}`, `not a whole number of bytes`},
		{"negative cpus", "/v1/sessions", `{"cpus": -2}`, `field "cpus": -2 is negative`},
		{"negative pids", "/v1/sessions", `{"pids": -1}`, `field "pids"`},
		{"negative keep", "/v1/sessions", `{"keep_snapshots": -1}`, `field "keep_snapshots"`},
		{"huge ttl", "/v1/sessions", `{"ttl": 1e12}`, `field "ttl"`},
		{"not json", "/v1/sessions", `{"name": }`, "not JSON"},
		{"cut", "/v1/sessions", `{"name": "x"`, "ends inside"},
		{"restore extra", "/v1/sessions/x/restore", `{"snapshot": "1-a", "force": true}`, `unknown field "force" (the fields are snapshot)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+tokA)
			s.Handler().ServeHTTP(rec, req)
			assert.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			var e apiError
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			assert.Contains(t, e.Error, c.want)
			assert.Equal(t, "invalid", e.Code)
			assert.NotContains(t, e.Error, "\n")
		})
	}
}

// A field given as null is as if absent; white space around the object is fine.
func TestNullFieldsAreAbsent(t *testing.T) {
	var q execRequest
	require.NoError(t, decodeStrict(strings.NewReader("\n {\"code\": \"1\", \"timeout\": null, \"env\": null}\n\n"), &q, bodyRequired))
	assert.Equal(t, "1", q.Code)
	assert.Zero(t, q.Timeout)
	var st startRequest
	require.NoError(t, decodeStrict(strings.NewReader(""), &st, bodyOptional), "start takes no body")
}
