package proxy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/runtimectl/runtimectl/egress"
)

// secret is a Secret parsed.
type secret struct {
	rule   egress.Rule
	header string
	value  string
}

// parsed is a Config checked and parsed.
type parsed struct {
	allow   egress.Allowlist
	secrets []secret
	hosts   map[string][]netip.Addr
	deny    []netip.Prefix
	answer  netip.Addr
}

func parseConfig(c egress.Config) (parsed, error) {
	var p parsed
	if c.Session == "" {
		return p, fmt.Errorf("egress config: no session")
	}
	var err error
	if p.allow, err = egress.ParseAllowHosts(c.Allow); err != nil {
		return p, err
	}
	for _, s := range c.Secrets {
		spec, err := egress.ParseSecretHeader(s.Host + "=" + s.Header + ":SECRET")
		if err != nil {
			return p, err
		}
		if !p.allow.Covers(spec.Host) {
			return p, fmt.Errorf("egress config: secret host %s is not allowed", spec.Host)
		}
		if s.Value == "" || strings.ContainsAny(s.Value, "\r\n\x00") {
			return p, fmt.Errorf("egress config: the value of %s for %s is empty or holds a line break or NUL", spec.Header, spec.Host)
		}
		p.secrets = append(p.secrets, secret{rule: spec.Host, header: spec.Header, value: s.Value})
	}
	p.hosts = map[string][]netip.Addr{}
	for name, addrs := range c.Hosts {
		for _, s := range addrs {
			a, ok := egress.ParseAddr(s)
			if !ok {
				return p, fmt.Errorf("egress config: hosts: %q is not an address (for %s)", s, name)
			}
			n := egress.NormalizeHost(name)
			p.hosts[n] = append(p.hosts[n], a)
		}
	}
	for _, s := range c.Deny {
		pr, err := parsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("egress config: deny: %v", err)
		}
		p.deny = append(p.deny, pr)
	}
	answer := c.Answer
	if answer == "" {
		answer = egress.AnswerAddr
	}
	a, ok := egress.ParseAddr(answer)
	if !ok || !a.Is4() {
		return p, fmt.Errorf("egress config: answer %q is not an IPv4 address", answer)
	}
	p.answer = a
	return p, nil
}

// parsePrefix parses an address (a prefix of its full length) or a CIDR prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			return pr, fmt.Errorf("%q is not an address or prefix", s)
		}
		if pr.Addr().Is4In6() {
			pr = netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()-96)
		}
		return pr.Masked(), nil
	}
	a, ok := egress.ParseAddr(s)
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
