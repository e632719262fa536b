package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
)

func TestAllowHostsAreCheckedAndKeptCanonical(t *testing.T) {
	st, err := Spec{Name: "x", AllowHosts: []string{"PyPI.org,*.Example.com:8443", "pypi.org"}, SecretHeaders: []string{"api.example.com:8443=authorization:TOKEN"}}.settings()
	require.NoError(t, err)
	assert.Equal(t, []string{"*.example.com:8443", "pypi.org"}, st.AllowHosts)
	assert.Equal(t, []string{"api.example.com:8443=Authorization:TOKEN"}, st.SecretHeaders)
	assert.Equal(t, "none", st.Network)
	cs := containerSpec(st)
	assert.True(t, cs.Egress)
	assert.Equal(t, "1", cs.Labels[contract.LabelAllowHosts])
	assert.False(t, containerSpec(Settings{Session: "y"}).Egress)

	for _, bad := range []Spec{
		{Name: "x", AllowHosts: []string{"a.test"}, Network: "bridge"},
		{Name: "x", SecretHeaders: []string{"a.test=X-Key:K"}},
		{Name: "x", AllowHosts: []string{"a.test"}, SecretHeaders: []string{"b.test=X-Key:K"}},
		{Name: "x", AllowHosts: []string{"bad host"}},
	} {
		_, err := bad.settings()
		assert.ErrorIs(t, err, ErrInvalid, "%+v", bad)
	}
}

func TestAllowHostsThatDifferAreAConflict(t *testing.T) {
	rec := Settings{AllowHosts: []string{"a.test", "b.test"}}
	assert.Empty(t, conflictsWith(Spec{AllowHosts: []string{"b.test,a.test"}}, rec))
	got := conflictsWith(Spec{AllowHosts: []string{"c.test"}}, rec)
	require.Len(t, got, 1)
	assert.Equal(t, "--allow-host c.test (the session has a.test,b.test)", got[0].CLI)
	got = conflictsWith(Spec{AllowHosts: []string{"a.test"}}, Settings{})
	require.Len(t, got, 1)
	assert.Contains(t, got[0].CLI, "(the session has none)")
	assert.True(t, Spec{AllowHosts: []string{"a.test"}}.asksSettings())
}

func TestSecretValuesComeFromTheControllersEnvironment(t *testing.T) {
	c := &Client{backend: "kubernetes", egress: EgressOptions{Lookup: func(k string) (string, bool) { return map[string]string{"TOKEN": "v1"}[k], k == "TOKEN" }}}
	spec, err := c.egressSpec(Settings{Session: "s", Image: "img", AllowHosts: []string{"api.test"}, SecretHeaders: []string{"api.test=X-Key:TOKEN"}})
	require.NoError(t, err)
	require.Len(t, spec.Config.Secrets, 1)
	assert.Equal(t, "v1", spec.Config.Secrets[0].Value)
	assert.Contains(t, spec.Config.CACert, "BEGIN CERTIFICATE")
	_, err = c.egressSpec(Settings{Session: "s", AllowHosts: []string{"api.test"}, SecretHeaders: []string{"api.test=X-Key:MISSING"}})
	assert.ErrorContains(t, err, "$MISSING is not set")
}
