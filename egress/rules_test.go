package egress

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
)

func TestParseRuleAcceptsNamesWildcardsAddressesAndPorts(t *testing.T) {
	for in, want := range map[string]string{
		"pypi.org":              "pypi.org",
		"PyPI.org.":             "pypi.org",
		" api.example.com ":     "api.example.com",
		"api.example.com:8443":  "api.example.com:8443",
		"*.example.com":         "*.example.com",
		"*.Example.com:443":     "*.example.com:443",
		"gitlab":                "gitlab",
		"_svc.example.com":      "_svc.example.com",
		"10.0.0.5":              "10.0.0.5",
		"10.0.0.5:8080":         "10.0.0.5:8080",
		"fd00::5":               "[fd00::5]",
		"[fd00::5]":             "[fd00::5]",
		"[FD00::5]:443":         "[fd00::5]:443",
		"::ffff:10.0.0.5":       "10.0.0.5",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
	} {
		r, err := ParseRule(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, r.String(), in)
		back, err := ParseRule(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, back, "String reads back: %s", in)
	}
}

func TestParseRuleRefusesWhatIsNotAHost(t *testing.T) {
	for in, words := range map[string]string{
		"":                      "empty host",
		"*":                     "every host",
		"*.":                    "every host",
		"https://pypi.org":      "not a URL",
		"pypi.org/simple":       "not a URL",
		"user@pypi.org":         "not a URL",
		"pypi.org:0":            "1 to 65535",
		"pypi.org:65536":        "1 to 65535",
		"pypi.org:http":         "1 to 65535",
		"pypi.org:+80":          "1 to 65535",
		"a.*.example.com":       "* only as the first part",
		"*example.com":          "* only as the first part",
		"bücher.example":        "IDNA",
		"a..b":                  "1 to 63 characters",
		"-a.example":            "begin or end with -",
		"a b":                   "not allowed in a host name",
		"[fd00::5":              "missing ]",
		"[fd00::5]x":            "unexpected",
		"fe80::1%eth0":          "not allowed",
		strings.Repeat("a", 64): "1 to 63 characters",
	} {
		_, err := ParseRule(in)
		require.Error(t, err, "%q", in)
		assert.Contains(t, err.Error(), words, "%q", in)
		assert.Contains(t, err.Error(), "allow-host", "the error names the flag: %q", in)
	}
}

func TestParseAllowHostsAddsUpSortsAndDropsDuplicates(t *testing.T) {
	a, err := ParseAllowHosts([]string{"b.test,a.test", "A.test:443", "a.test", "*.c.test,", "10.0.0.1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"*.c.test", "10.0.0.1", "a.test", "a.test:443", "b.test"}, a.Strings())
	same, err := CanonicalAllowHosts([]string{"10.0.0.1,*.c.test", "a.test:443,b.test,a.test"})
	require.NoError(t, err)
	assert.Equal(t, a.Strings(), same, "the same entries in another order are the same list")

	_, err = ParseAllowHosts([]string{"a.test,,b.test"})
	assert.NoError(t, err, "an empty entry between commas is skipped")
	_, err = ParseAllowHosts([]string{""})
	assert.Error(t, err, "an empty value is refused")
}

func TestAllowlistMatchesByNameAndPort(t *testing.T) {
	a, err := ParseAllowHosts([]string{"allowed.test", "*.wild.test", "api.test:8443", "10.0.0.5:8080", "[fd00::5]"})
	require.NoError(t, err)
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"allowed.test", 443, true},
		{"allowed.test", 80, true},
		{"ALLOWED.test.", 443, true},
		{"allowed.test", 8080, false},
		{"sub.allowed.test", 443, false},
		{"notallowed.test", 443, false},
		{"a.wild.test", 443, true},
		{"a.b.wild.test", 80, true},
		{"wild.test", 443, false},
		{"xwild.test", 443, false},
		{"api.test", 8443, true},
		{"api.test", 443, false},
		{"10.0.0.5", 8080, true},
		{"10.0.0.5", 80, false},
		{"::ffff:10.0.0.5", 8080, true},
		{"[fd00::5]", 443, true},
		{"fd00::5", 80, true},
		{"10.0.0.6", 8080, false},
	} {
		assert.Equal(t, c.want, a.Allows(c.host, c.port), "%s:%d", c.host, c.port)
	}
	assert.True(t, a.AllowsName("api.test"))
	assert.True(t, a.AllowsName("x.wild.test"))
	assert.False(t, a.AllowsName("denied.test"))
	assert.Equal(t, []int{8443}, a.PortsFor("api.test"))
	assert.Equal(t, []int{80, 443}, a.PortsFor("allowed.test"))
	assert.Empty(t, a.PortsFor("denied.test"))
	assert.Equal(t, []int{80, 443, 8080, 8443}, a.Ports())
}

func TestNamesNeverMatchAddresses(t *testing.T) {
	a, err := ParseAllowHosts([]string{"*.0.0.10", "5.0.0.10.in-addr.arpa"})
	require.NoError(t, err)
	assert.False(t, a.Allows("10.0.0.5", 443), "a wildcard does not match an address")
	assert.False(t, a.Allows("10.0.0.10", 443))
	assert.True(t, a.Allows("a.0.0.10", 443), "a name that ends in digits is still a name")
}

func TestParseSecretHeader(t *testing.T) {
	s, err := ParseSecretHeader("api.test=authorization:API_TOKEN")
	require.NoError(t, err)
	assert.Equal(t, "api.test=Authorization:API_TOKEN", s.String())
	assert.False(t, s.FromFile())
	s, err = ParseSecretHeader("*.api.test:8443=X-Api-Key:/run/secrets/key")
	require.NoError(t, err)
	assert.True(t, s.FromFile())
	assert.Equal(t, 8443, s.Host.Port)

	for in, words := range map[string]string{
		"api.test":                       "HOST=HEADER:ENV",
		"api.test=Authorization":         "HOST=HEADER:ENV",
		"api.test=:TOKEN":                "HOST=HEADER:ENV",
		"api.test=Authorization:":        "HOST=HEADER:ENV",
		"10.0.0.5=Authorization:T":       "not to an address",
		"api.test=Bad Header:T":          "not a valid header name",
		"api.test=Host:T":                "manages Host",
		"api.test=proxy-authorization:T": "manages Proxy-Authorization",
		"api.test=X-Key:1TOKEN":          "neither an environment variable",
		"https://api.test=X-Key:T":       "not a URL",
	} {
		_, err := ParseSecretHeader(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), words, in)
	}
}

func TestSecretHeadersMustBeAllowed(t *testing.T) {
	a, err := ParseAllowHosts([]string{"api.test", "*.wild.test", "tls.test:443"})
	require.NoError(t, err)
	specs, err := ParseSecretHeaders([]string{"api.test=X-Key:K", "x.wild.test=X-Key:K", "*.a.wild.test=X-Key:K", "tls.test=X-Key:K", "api.test=X-Key:K"}, a)
	require.NoError(t, err)
	assert.Len(t, specs, 4, "duplicates dropped")

	_, err = ParseSecretHeaders([]string{"denied.test=X-Key:K"}, a)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--allow-host denied.test")
	_, err = ParseSecretHeaders([]string{"*.test=X-Key:K"}, a)
	assert.Error(t, err, "a wider wildcard than the allowed one")
	_, err = ParseSecretHeaders([]string{"api.test:8443=X-Key:K"}, a)
	assert.Error(t, err, "a port that is not allowed")
	_, err = ParseSecretHeaders([]string{"api.test=X-Key:A", "api.test=x-key:B"}, a)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "two sources")
}

func TestTheContractsProxyURLIsTheRelaysPort(t *testing.T) {
	assert.Equal(t, "http://"+AnswerAddr+":"+strconv.Itoa(ProxyPort), contract.EgressProxyURL)
}
