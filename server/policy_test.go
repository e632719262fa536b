package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenFilePoliciesLayerDefaultsRolesAndTokens(t *testing.T) {
	p := writeTokens(t, strings.Join([]string{
		"role default memory=1g sessions=5",
		"role big memory=8g cpus=4 network=none,bridge images=runtimectl/*,registry.example/team/* allow_hosts=pypi.org,*.pythonhosted.org",
		tokA + " alice role=big pids=2048",
		tokB + " bob execs=2 disk=unlimited",
		tokAdmin + " ops admin",
	}, "\n")+"\n", 0o600)
	toks, err := LoadTokens(p)
	require.NoError(t, err)
	a, _ := toks.Lookup(tokA)
	assert.Equal(t, "memory=8GiB cpus=4 pids=2048 disk=20GiB network=none,bridge images=runtimectl/*,registry.example/team/* allow_hosts=pypi.org,*.pythonhosted.org sessions=5 execs=unlimited", a.Policy.String())
	assert.Equal(t, "memory= in the token file, from role big", a.Policy.where("memory"))
	assert.Equal(t, "pids= in the token file, from token alice", a.Policy.where("pids"))
	assert.Equal(t, "sessions= in the token file, from role default", a.Policy.where("sessions"))
	assert.Equal(t, "images= in the token file, from role big", a.Policy.where("images"))
	b, _ := toks.Lookup(tokB)
	assert.Equal(t, "memory=1GiB cpus=2 pids=1024 disk=unlimited network=none images=runtimectl/* allow_hosts=none sessions=5 execs=2", b.Policy.String())
	assert.Equal(t, "cpus= in the token file, from the built-in default", b.Policy.where("cpus"))
	ad, _ := toks.Lookup(tokAdmin)
	assert.True(t, ad.Admin)
	assert.Equal(t, Policy{}.String(), ad.Policy.String(), "an admin is unlimited")
}

func TestBadPoliciesSayWhatIsWrong(t *testing.T) {
	for content, want := range map[string]string{
		tokA + " alice memory=lots\n":               "memory=lots: give a size",
		tokA + " alice colour=blue\n":               `unknown limit "colour": the limits are memory, cpus, pids, disk, network, images, allow_hosts, sessions, execs`,
		tokA + " alice allow_hosts=pypi.org:443\n":  `allow_hosts=pypi.org:443: "pypi.org:443" is not a host glob`,
		tokA + " alice role=nope\n":                 `no role "nope"; define it with a line`,
		tokA + " alice network=host\n":              "network=host: give none, bridge",
		tokA + " ops admin memory=1g\n":             "an admin token has no limits",
		"role r x=1\nrole r cpus=1\n" + tokA + " a": "role \"r\" is given twice",
		tokA + " alice sessions=-1\n":               "sessions=-1: give a positive whole number",
		tokA + " alice images=[\n":                  "is not a glob",
	} {
		_, err := LoadTokens(writeTokens(t, content, 0o600))
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want, content)
	}
}

// A start past the token's policy is a 403 that names the limit and where it was set, before
// the engine is asked anything.
func TestStartsPastTheTokensPolicyAre403(t *testing.T) {
	s := newUnitServer(t)
	for _, c := range []struct{ body, want string }{
		{`{"memory": "100g"}`, "memory 100GiB is over this token's limit of 4GiB (memory= in the token file, from the built-in default)"},
		{`{"cpus": 3}`, "cpus 3 is over this token's limit of 2"},
		{`{"pids": 100000}`, "pids 100000 is over this token's limit of 1024"},
		{`{"disk": "10t"}`, "disk 10TiB is over this token's limit of 20GiB"},
		{`{"network": "bridge"}`, "network bridge is not allowed for this token (allowed: none; network= in the token file"},
		{`{"image": "evil/miner:latest"}`, "image evil/miner:latest is not allowed for this token (allowed: runtimectl/*"},
		{`{"allow_hosts": ["pypi.org"]}`, "allow_hosts pypi.org is not allowed for this token (allowed: none; allow_hosts= in the token file, from the built-in default)"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+tokA)
		s.Handler().ServeHTTP(rec, req)
		assert.Equal(t, http.StatusForbidden, rec.Code, c.body)
		assert.Contains(t, rec.Body.String(), c.want, c.body)
		assert.Contains(t, rec.Body.String(), `"code":"limit"`)
	}
	q := startRequest{}
	tok := Token{Name: "t", Policy: DefaultPolicy()}
	tok.Policy.Memory = 512 << 20
	require.NoError(t, s.applyPolicy(tok, &q))
	assert.Equal(t, Size(512<<20), q.Memory, "a default over the ceiling becomes the ceiling")
	tok.Policy.AllowHosts = []string{"pypi.org", "*.pythonhosted.org"}
	q = startRequest{AllowHosts: []string{"pypi.org:443", "files.pythonhosted.org", "PyPI.org"}}
	assert.NoError(t, s.applyPolicy(tok, &q), "each host matches a glob, port and case aside")
	q = startRequest{AllowHosts: []string{"pypi.org", "evil.example"}}
	assert.ErrorContains(t, s.applyPolicy(tok, &q), "allow_hosts evil.example is not allowed for this token (allowed: pypi.org, *.pythonhosted.org;")
	tok.Policy.AllowHosts = []string{"*"}
	q = startRequest{AllowHosts: []string{"evil.example:8443"}}
	assert.NoError(t, s.applyPolicy(tok, &q), "allow_hosts=unlimited is *")
	q = startRequest{Memory: 100 << 30, Network: "bridge", AllowHosts: []string{"anything.example"}}
	assert.NoError(t, s.applyPolicy(Token{Name: "ops", Admin: true}, &q), "an admin is unlimited")
}
