package egress

import (
	"fmt"
	"net/netip"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// WebPorts are the ports a rule without one allows: HTTP's and HTTPS's.
var WebPorts = []int{80, 443}

// Rule is one entry of an allowlist, as `--allow-host` takes it: an exact name
// (`pypi.org`), a wildcard (`*.example.com`: any name that ends in `.example.com`, at any depth,
// but not example.com itself), or a literal address (`10.0.0.5`, `[fd00::5]`, which is how an
// address the proxy refuses otherwise, such as the engine's host, is allowed), each with an
// optional port (`:8443`); without one the rule allows WebPorts.
type Rule struct {
	// Name is the lowercase name without a trailing dot, or for a wildcard the suffix after
	// "*."; empty for an address.
	Name     string
	Wildcard bool
	Addr     netip.Addr // valid for an address rule
	Port     int        // 0: WebPorts
}

// ParseRule parses one allowlist entry (no commas).
func ParseRule(s string) (Rule, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, fmt.Errorf("allow-host %q: empty host; give a name such as pypi.org or *.example.com", in)
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return Rule{}, fmt.Errorf("allow-host %q: give a host name, not a URL (for example pypi.org or api.example.com:8443)", in)
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return Rule{}, fmt.Errorf("allow-host %q: %v", in, err)
	}
	r := Rule{Port: port}
	if a, ok := ParseAddr(host); ok {
		r.Addr = a
		return r, nil
	}
	if strings.HasPrefix(host, "*.") {
		r.Wildcard = true
		host = host[2:]
	}
	name, err := normalizeName(host)
	if err != nil {
		return Rule{}, fmt.Errorf("allow-host %q: %v", in, err)
	}
	if a, ok := ParseAddr(name); ok && !r.Wildcard {
		r.Addr = a // "0.0.0.0." is the address, as its canonical form reads
		return r, nil
	}
	r.Name = name
	return r, nil
}

// splitHostPort splits HOST[:PORT], [V6][:PORT] or a bare IPv6 address.
func splitHostPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("missing ] after the IPv6 address")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("unexpected %q after the IPv6 address", rest)
		}
		p, err := parsePort(rest[1:])
		return host, p, err
	}
	if strings.Count(s, ":") > 1 { // a bare IPv6 address
		return s, 0, nil
	}
	host, p, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	port, err := parsePort(p)
	return host, port, err
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(p, "+") {
		return 0, fmt.Errorf("port %q: give a number from 1 to 65535", p)
	}
	return n, nil
}

// ParseAddr parses a literal IP address (no zone); IPv4-mapped IPv6 addresses become IPv4.
func ParseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// normalizeName lowercases a DNS name, drops one trailing dot and checks its syntax.
func normalizeName(s string) (string, error) {
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	if name == "" || name == "*" {
		return "", fmt.Errorf("a bare * would allow every host: name the hosts (or use --network bridge for the whole network)")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("a name is at most 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("each dot-separated part of a name has 1 to 63 characters")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c == '*':
				return "", fmt.Errorf("* only as the first part (*.example.com)")
			case c >= 0x80:
				return "", fmt.Errorf("non-ASCII name: give its IDNA form (xn--...)")
			default:
				return "", fmt.Errorf("%q is not allowed in a host name", string(c))
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("a part of a name may not begin or end with -")
		}
	}
	return name, nil
}

// String is the rule's canonical form, which ParseRule reads back.
func (r Rule) String() string {
	var host string
	switch {
	case r.Addr.IsValid() && r.Addr.Is6():
		host = "[" + r.Addr.String() + "]"
	case r.Addr.IsValid():
		host = r.Addr.String()
	case r.Wildcard:
		host = "*." + r.Name
	default:
		host = r.Name
	}
	if r.Port != 0 {
		host += ":" + strconv.Itoa(r.Port)
	}
	return host
}

// Ports are the ports the rule allows.
func (r Rule) Ports() []int {
	if r.Port == 0 {
		return WebPorts
	}
	return []int{r.Port}
}

// AllowsPort reports whether the rule allows port.
func (r Rule) AllowsPort(port int) bool { return slices.Contains(r.Ports(), port) }

// Matches reports whether host (normalized, as NormalizeHost makes it: a name, or an address)
// is the rule's.
func (r Rule) Matches(host string) bool {
	if r.Addr.IsValid() {
		a, ok := ParseAddr(host)
		return ok && a == r.Addr
	}
	if _, isAddr := ParseAddr(host); isAddr {
		return false // names never match addresses: egress goes by name
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Name)
	}
	return host == r.Name
}

// Allowlist is a session's allowed destinations.
type Allowlist []Rule

// ParseAllowHosts parses `--allow-host` values, each one or more comma-separated entries;
// repeated values add up. The result is sorted and without duplicates, so that two lists
// that allow the same entries compare equal.
func ParseAllowHosts(values []string) (Allowlist, error) {
	var rules Allowlist
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			if strings.TrimSpace(e) == "" && strings.Contains(v, ",") {
				continue // a trailing comma
			}
			r, err := ParseRule(e)
			if err != nil {
				return nil, err
			}
			rules = append(rules, r)
		}
	}
	slices.SortFunc(rules, func(a, b Rule) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(rules, func(a, b Rule) bool { return a.String() == b.String() }), nil
}

// CanonicalAllowHosts is ParseAllowHosts' result as strings: what a session's settings keep.
func CanonicalAllowHosts(values []string) ([]string, error) {
	a, err := ParseAllowHosts(values)
	if err != nil {
		return nil, err
	}
	return a.Strings(), nil
}

// Strings returns the rules' canonical forms.
func (a Allowlist) Strings() []string {
	out := make([]string, len(a))
	for i, r := range a {
		out[i] = r.String()
	}
	return out
}

// NormalizeHost lowercases a host as a request names it, drops a trailing dot, and takes the
// brackets off an IPv6 literal.
func NormalizeHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if a, ok := ParseAddr(host); ok {
		return a.String()
	}
	return host
}

// Allows reports whether host (a name or a literal address) on port is allowed.
func (a Allowlist) Allows(host string, port int) bool {
	host = NormalizeHost(host)
	for _, r := range a {
		if r.Matches(host) && r.AllowsPort(port) {
			return true
		}
	}
	return false
}

// AllowsName reports whether any rule names host, on any port: what the resolver answers.
func (a Allowlist) AllowsName(host string) bool {
	host = NormalizeHost(host)
	for _, r := range a {
		if r.Matches(host) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether a rule names the address itself on port: how an address the
// proxy refuses otherwise is allowed.
func (a Allowlist) AllowsAddr(addr netip.Addr, port int) bool {
	for _, r := range a {
		if r.Addr.IsValid() && r.Addr == addr.Unmap() && r.AllowsPort(port) {
			return true
		}
	}
	return false
}

// PortsFor returns the ports on which host is allowed, sorted (none: not allowed at all).
func (a Allowlist) PortsFor(host string) []int {
	host = NormalizeHost(host)
	var ports []int
	for _, r := range a {
		if r.Matches(host) {
			ports = append(ports, r.Ports()...)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// Ports returns every port some rule allows, sorted: the ports the session's relay listens on.
func (a Allowlist) Ports() []int {
	var ports []int
	for _, r := range a {
		ports = append(ports, r.Ports()...)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// Covers reports whether the allowlist allows every host the pattern s names, on one of its
// ports at least: a secret header's host must be allowed.
func (a Allowlist) Covers(s Rule) bool {
	for _, r := range a {
		if r.Addr.IsValid() || !slices.ContainsFunc(s.Ports(), r.AllowsPort) {
			continue
		}
		switch {
		case !s.Wildcard && r.Matches(s.Name):
			return true
		case s.Wildcard && r.Wildcard && (s.Name == r.Name || strings.HasSuffix(s.Name, "."+r.Name)):
			return true
		}
	}
	return false
}

// SecretSpec is a `--secret-header HOST=HEADER:SOURCE` as the session's settings keep it: the
// host (a name or wildcard, with an optional port, as in Rule), the header, and where the
// controller takes the value from: an environment variable of its own, or, when SOURCE holds
// a slash, a file it reads. The value itself is never in the settings.
type SecretSpec struct {
	Host   Rule
	Header string // canonical (textproto)
	Source string
}

// headers the proxy manages itself, which a secret may not set.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Keep-Alive"}

// ParseSecretHeader parses HOST=HEADER:SOURCE.
func ParseSecretHeader(s string) (SecretSpec, error) {
	const form = "give HOST=HEADER:ENV (for example api.example.com=Authorization:API_TOKEN)"
	host, rest, ok := strings.Cut(s, "=")
	if !ok {
		return SecretSpec{}, fmt.Errorf("secret-header %q: %s", s, form)
	}
	header, source, ok := strings.Cut(rest, ":")
	if !ok || header == "" || source == "" {
		return SecretSpec{}, fmt.Errorf("secret-header %q: %s", s, form)
	}
	r, err := ParseRule(host)
	if err != nil {
		return SecretSpec{}, fmt.Errorf("secret-header %q: %v", s, strings.TrimPrefix(err.Error(), fmt.Sprintf("allow-host %q: ", host)))
	}
	if r.Addr.IsValid() {
		return SecretSpec{}, fmt.Errorf("secret-header %q: secret headers go to hosts by name (the proxy presents a certificate for the name), not to an address", s)
	}
	for i := 0; i < len(header); i++ {
		if !isTokenChar(header[i]) {
			return SecretSpec{}, fmt.Errorf("secret-header %q: %q is not a valid header name", s, header)
		}
	}
	header = textproto.CanonicalMIMEHeaderKey(header)
	if slices.Contains(reservedHeaders, header) || strings.HasPrefix(header, "Proxy-") {
		return SecretSpec{}, fmt.Errorf("secret-header %q: the proxy manages %s itself; give another header", s, header)
	}
	if !strings.Contains(source, "/") && !isEnvName(source) {
		return SecretSpec{}, fmt.Errorf("secret-header %q: %q is neither an environment variable name nor a file path (a path holds a /)", s, source)
	}
	return SecretSpec{Host: r, Header: header, Source: source}, nil
}

// String is the spec's canonical form, which ParseSecretHeader reads back.
func (s SecretSpec) String() string { return s.Host.String() + "=" + s.Header + ":" + s.Source }

// FromFile reports whether the value comes from a file rather than an environment variable.
func (s SecretSpec) FromFile() bool { return strings.Contains(s.Source, "/") }

// ParseSecretHeaders parses `--secret-header` values and checks that the allowlist allows
// each one's host. The result is sorted, without duplicates; two specs for the same host and
// header are refused.
func ParseSecretHeaders(values []string, allow Allowlist) ([]SecretSpec, error) {
	var specs []SecretSpec
	for _, v := range values {
		s, err := ParseSecretHeader(v)
		if err != nil {
			return nil, err
		}
		if !allow.Covers(s.Host) {
			return nil, fmt.Errorf("secret-header %q: %s is not allowed; allow it too with --allow-host %s", v, s.Host, s.Host)
		}
		specs = append(specs, s)
	}
	slices.SortFunc(specs, func(a, b SecretSpec) int { return strings.Compare(a.String(), b.String()) })
	specs = slices.CompactFunc(specs, func(a, b SecretSpec) bool { return a.String() == b.String() })
	for i := 1; i < len(specs); i++ {
		if specs[i].Host == specs[i-1].Host && specs[i].Header == specs[i-1].Header {
			return nil, fmt.Errorf("secret-header: %s has two sources for %s (%s and %s); give one", specs[i].Host, specs[i].Header, specs[i-1].Source, specs[i].Source)
		}
	}
	return specs, nil
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isEnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return s != ""
}

// HostPort joins a host and port, with brackets for an IPv6 address.
func HostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}
