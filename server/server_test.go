package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

func writeTokens(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens.txt")
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

const (
	tokA     = "aaaaaaaaaaaaaaaaaaaaaaaa"
	tokB     = "bbbbbbbbbbbbbbbbbbbbbbbb"
	tokAdmin = "cccccccccccccccccccccccc"
)

func TestTokenFileIsParsedWithCommentsAndAdmins(t *testing.T) {
	p := writeTokens(t, "# the team\n"+tokA+" alice   # her laptop\n\n"+tokB+" bob\n"+tokAdmin+" ops admin\n", 0o600)
	toks, err := LoadTokens(p)
	require.NoError(t, err)
	assert.Equal(t, 3, toks.Len())
	a, ok := toks.Lookup(tokA)
	require.True(t, ok)
	assert.Equal(t, "alice", a.Name)
	assert.False(t, a.Admin)
	assert.Equal(t, DefaultPolicy().String(), a.Policy.String(), "a token the file says nothing about has the defaults")
	ad, ok := toks.Lookup(tokAdmin)
	require.True(t, ok)
	assert.True(t, ad.Admin)
	_, ok = toks.Lookup("not-a-token-at-all-xxxxxx")
	assert.False(t, ok)
	_, ok = toks.Lookup("")
	assert.False(t, ok)
}

func TestTokenFileIsRefusedWhenOthersCanReadIt(t *testing.T) {
	p := writeTokens(t, tokA+" alice\n", 0o644)
	_, err := LoadTokens(p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chmod 600")
}

func TestBadTokenFilesSayWhatIsWrong(t *testing.T) {
	for content, want := range map[string]string{
		"":                                    "no token",
		"short alice\n":                       "shorter than 16",
		tokA + "\n":                           "TOKEN NAME [admin]",
		tokA + " alice root\n":                "TOKEN NAME [admin]",
		tokA + " alice\n" + tokB + " alice\n": "given twice",
	} {
		_, err := LoadTokens(writeTokens(t, content, 0o600))
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want, content)
	}
}

func TestReloadKeepsTheTokensInForceWhenTheFileIsBad(t *testing.T) {
	p := writeTokens(t, tokA+" alice\n", 0o600)
	toks, err := LoadTokens(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte(tokB+" bob\n"), 0o600))
	require.NoError(t, toks.Reload())
	_, ok := toks.Lookup(tokA)
	assert.False(t, ok, "a token taken out of the file is refused after a reload")
	_, ok = toks.Lookup(tokB)
	assert.True(t, ok)
	require.NoError(t, os.WriteFile(p, []byte("garbage\n"), 0o600))
	assert.Error(t, toks.Reload())
	_, ok = toks.Lookup(tokB)
	assert.True(t, ok, "a bad file leaves the tokens in force")
}

func newUnitServer(t *testing.T) *Server {
	t.Helper()
	toks, err := LoadTokens(writeTokens(t, tokA+" alice\n", 0o600))
	require.NoError(t, err)
	de, err := docker.New("") // lazy: these tests never reach the engine
	require.NoError(t, err)
	c := session.NewWithEngine(de)
	t.Cleanup(func() { c.Close() })
	s, err := New(Config{Client: c, Tokens: toks})
	require.NoError(t, err)
	return s
}

func TestRequestsWithoutAValidTokenGet401AndNoDetail(t *testing.T) {
	s := newUnitServer(t)
	for _, auth := range []string{"", "Bearer ", "Bearer wrong-token-wrong-token", "Basic " + tokA, tokA} {
		for _, path := range []string{"/v1/sessions", "/v1/sessions/x/exec", "/metrics", "/no/such/route"} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			s.Handler().ServeHTTP(rec, req)
			assert.Equal(t, http.StatusUnauthorized, rec.Code, "%q %s", auth, path)
			assert.Empty(t, rec.Body.String(), "401 carries no detail")
		}
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	assert.Equal(t, http.StatusOK, rec.Code, "/healthz needs no token")
}

func TestBadInputIsA400ThatSaysWhatToDo(t *testing.T) {
	s := newUnitServer(t)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/sessions", `{"name": "Bad Name"}`, "session name"},
		{"POST", "/v1/sessions", `{"nmae": "x"}`, "unknown field"},
		{"POST", "/v1/sessions", `{"memory": "lots"}`, "512m"},
		{"POST", "/v1/sessions/x/exec", `{"code": "1", "timeout": "soon"}`, "30s"},
		{"GET", "/v1/sessions/NOPE/vars", ``, "session name"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+tokA)
		s.Handler().ServeHTTP(rec, req)
		assert.Equal(t, http.StatusBadRequest, rec.Code, c.body)
		var e apiError
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
		assert.Contains(t, e.Error, c.want)
		assert.NotContains(t, e.Error, "\n")
	}
}

func TestJSONBodiesOverTheLimitAre413(t *testing.T) {
	s := newUnitServer(t)
	s.cfg.MaxBody = 100
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/sessions/x/exec", strings.NewReader(`{"code": "`+strings.Repeat("x", 200)+`"}`))
	req.Header.Set("Authorization", "Bearer "+tokA)
	s.Handler().ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
}

// Every route of the server is in openapi.json, and every path and method documented there is
// a route.
func TestOpenAPIDocumentsExactlyTheRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &doc))
	assert.True(t, strings.HasPrefix(doc.OpenAPI, "3."))
	var documented []string
	for p, ops := range doc.Paths {
		for m := range ops {
			switch m {
			case "get", "post", "put", "delete", "patch", "head":
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	s := newUnitServer(t)
	var served []string
	wild := regexp.MustCompile(`\{([a-z_]+)\.\.\.\}`)
	for _, rt := range s.routes() {
		served = append(served, rt.method+" "+wild.ReplaceAllString(rt.pattern, "{$1}"))
	}
	sort.Strings(documented)
	sort.Strings(served)
	assert.Equal(t, served, documented)
}

func TestSizesAndDurationsInJSON(t *testing.T) {
	var v struct {
		S Size     `json:"s"`
		D Duration `json:"d"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"s": "512m", "d": "2m"}`), &v))
	assert.Equal(t, Size(512<<20), v.S)
	assert.Equal(t, Duration(2*time.Minute), v.D)
	require.NoError(t, json.Unmarshal([]byte(`{"s": 1024, "d": 1.5}`), &v))
	assert.Equal(t, Size(1024), v.S)
	assert.Equal(t, Duration(1500*time.Millisecond), v.D)
	assert.Error(t, json.Unmarshal([]byte(`{"s": -1}`), &v))
	assert.Error(t, json.Unmarshal([]byte(`{"d": "-3s"}`), &v))
}

// A character split across two chunks of output reaches the client whole.
func TestStreamHoldsBackAnIncompleteCharacter(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := &streamWriter{w: rec, rc: http.NewResponseController(rec), timeout: time.Second, gone: make(chan struct{}),
		carry: map[string][]byte{}, bytes: func(string, int) {}}
	euro := []byte("€") // 3 bytes
	sw.chunk("stdout", append([]byte("price: "), euro[:1]...))
	sw.chunk("stdout", euro[1:2])
	sw.chunk("stdout", append(euro[2:], '\n'))
	sw.chunk("stderr", []byte{0xff, 'x'})
	sw.flushCarry()
	var got []Event
	for _, line := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n") {
		var e Event
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		got = append(got, e)
	}
	var out string
	for _, e := range got {
		if e.Event == "stdout" {
			out += e.Data
		}
	}
	assert.Equal(t, "price: €\n", out)
	assert.Equal(t, Event{Event: "stderr", Data: "\ufffdx"}, got[len(got)-1], "invalid bytes become U+FFFD")
}

// Secret headers name the server's own environment variables or files: a token that is not an
// admin's may not give them (it could send the server's secrets to a host it allows).
func TestSecretHeadersNeedAnAdminToken(t *testing.T) {
	s := newUnitServer(t)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(`{"name": "x", "allow_hosts": ["evil.test"], "secret_headers": ["evil.test=X-Leak:HOME"]}`))
	req.Header.Set("Authorization", "Bearer "+tokA)
	s.Handler().ServeHTTP(rec, req)
	assert.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "admin")
}
