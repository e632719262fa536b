package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/egress/proxy"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Egress by name (issue 26). A session with allowed hosts (Spec.AllowHosts, `--allow-host`)
// has an egress proxy of its own, which the engine runs (Egress) before the session's runtime
// starts and stops and removes with it. The session's runtime reaches nothing but that proxy
// (Docker: loopback only, the proxy behind a unix socket on a volume of the two; Kubernetes: a
// NetworkPolicy that lets it reach the proxy's pod only), and its agent relays the session's
// HTTP(S)_PROXY, DNS and the allowed names' ports there. The secret headers' values
// (Spec.SecretHeaders) are read here, by the controller, when the proxy is made, and go to the
// proxy only: the settings keep where they come from, never the values.

// EgressOptions tune the egress proxies a Client makes (WithEgress).
type EgressOptions struct {
	// Network is the proxies' outside network on Docker ("": the engine's, runtimectl-egress).
	Network string
	// Hosts are addresses the proxies give names before their resolver (tests, split horizons).
	Hosts map[string][]string
	// UpstreamCAs (PEM) are roots the proxies trust, beside the system's, for the hosts of
	// secret headers (whose TLS they terminate).
	UpstreamCAs string
	// Deny are addresses or prefixes the proxies refuse besides their own list (loopback,
	// link-local, their gateways) and the engine host's addresses, which a Client on a local
	// engine adds itself.
	Deny []string
	// Lookup returns a secret header's value from its source (an environment variable); the
	// default is os.LookupEnv. A source with a slash is a file, read as it is (one trailing
	// newline dropped).
	Lookup func(name string) (string, bool)
}

// WithEgress sets how the Client's egress proxies are made.
func WithEgress(o EgressOptions) Option { return func(opts *options) { opts.egress = o } }

// egressSettings checks and canonicalizes a spec's allowed hosts and secret headers.
func egressSettings(s Spec) (allow, secrets []string, err error) {
	if len(s.AllowHosts) == 0 {
		if len(s.SecretHeaders) > 0 {
			return nil, nil, advice.Errorf("%w secret headers need allowed hosts: add %s for their hosts", ErrInvalid, flag("AllowHosts", "--allow-host"))
		}
		return nil, nil, nil
	}
	if s.Network == "bridge" {
		return nil, nil, advice.Errorf("%w %s and %s: a session with allowed hosts reaches them through its egress proxy and nothing else; give one of the two", ErrInvalid, flag("AllowHosts", "--allow-host"), flag(`Network "bridge"`, "--network bridge"))
	}
	list, err := egress.ParseAllowHosts(s.AllowHosts)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %v", ErrInvalid, err)
	}
	specs, err := egress.ParseSecretHeaders(s.SecretHeaders, list)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %v", ErrInvalid, err)
	}
	for _, sp := range specs {
		secrets = append(secrets, sp.String())
	}
	return list.Strings(), secrets, nil
}

// egressConflicts words how a spec's egress differs from a session's (conflictsWith).
func egressConflicts(spec Spec, st Settings) []advice.Words {
	var out []advice.Words
	if len(spec.AllowHosts) > 0 {
		want, err := egress.CanonicalAllowHosts(spec.AllowHosts)
		if err == nil && strings.Join(want, ",") != strings.Join(st.AllowHosts, ",") {
			rest := fmt.Sprintf(" %s (the session has %s)", strings.Join(want, ","), orNone(st.AllowHosts))
			out = append(out, advice.Words{Lib: "AllowHosts" + rest, CLI: "--allow-host" + rest})
		}
	}
	if len(spec.SecretHeaders) > 0 {
		var want []string
		if list, err := egress.ParseAllowHosts(spec.AllowHosts); err == nil {
			if specs, err := egress.ParseSecretHeaders(spec.SecretHeaders, list); err == nil {
				for _, sp := range specs {
					want = append(want, sp.String())
				}
			}
		}
		if want != nil && strings.Join(want, ",") != strings.Join(st.SecretHeaders, ",") {
			rest := fmt.Sprintf(" %s (the session has %s)", strings.Join(want, ","), orNone(st.SecretHeaders))
			out = append(out, advice.Words{Lib: "SecretHeaders" + rest, CLI: "--secret-header" + rest})
		}
	}
	return out
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ",")
}

// startEgress starts the proxy of a session with allowed hosts (nothing for others).
func (c *Client) startEgress(ctx context.Context, st Settings) error {
	if len(st.AllowHosts) == 0 {
		return nil
	}
	if c.egr == nil {
		return advice.Errorf("%w: session %q has allowed hosts, and the %s engine runs no egress proxy", ErrInvalid, st.Session, c.backend)
	}
	return c.egr.StartEgress(ctx, st.Session, func() (engine.EgressSpec, error) { return c.egressSpec(st) })
}

// startEgressOf starts the proxy of an existing session whose runtime says it has allowed
// hosts (contract.LabelAllowHosts), from its recorded settings.
func (c *Client) startEgressOf(ctx context.Context, name string, ci engine.Info) error {
	if ci.Labels[contract.LabelAllowHosts] == "" {
		return nil
	}
	st, err := c.RecordedSettings(ctx, name)
	if err != nil {
		return err
	}
	st.Session = name
	return c.startEgress(ctx, st)
}

// stopEgress and removeEgress end a session's proxy, where the engine has them.
func (c *Client) stopEgress(ctx context.Context, name string) error {
	if c.egr == nil {
		return nil
	}
	return c.egr.StopEgress(ctx, name, 5*time.Second)
}

func (c *Client) removeEgress(ctx context.Context, name string) error {
	if c.egr == nil {
		return nil
	}
	return c.egr.RemoveEgress(ctx, name)
}

// egressSpec is the proxy of session st: its allowlist, its secret headers with their values
// (read now), a CA for them, and what the Client's EgressOptions add.
func (c *Client) egressSpec(st Settings) (engine.EgressSpec, error) {
	o := c.egress
	cfg := egress.Config{Session: st.Session, Allow: st.AllowHosts, Hosts: o.Hosts, UpstreamCAs: o.UpstreamCAs, Deny: append(c.hostAddrs(), o.Deny...)}
	lookup := o.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var names []string
	for _, raw := range st.SecretHeaders {
		sp, err := egress.ParseSecretHeader(raw)
		if err != nil {
			return engine.EgressSpec{}, err
		}
		value, err := secretValue(sp, lookup)
		if err != nil {
			return engine.EgressSpec{}, fmt.Errorf("session %q: %w", st.Session, err)
		}
		cfg.Secrets = append(cfg.Secrets, egress.Secret{Host: sp.Host.String(), Header: sp.Header, Value: value})
		names = append(names, sp.Host.Name)
	}
	if len(names) > 0 {
		cert, key, err := proxy.NewCA(st.Session, names)
		if err != nil {
			return engine.EgressSpec{}, fmt.Errorf("session %q: egress CA: %w", st.Session, err)
		}
		cfg.CACert, cfg.CAKey = string(cert), string(key)
	}
	return engine.EgressSpec{Session: st.Session, Image: st.Image, Config: cfg, Network: o.Network}, nil
}

// secretValue reads a secret header's value from its source.
func secretValue(sp egress.SecretSpec, lookup func(string) (string, bool)) (string, error) {
	if sp.FromFile() {
		b, err := os.ReadFile(sp.Source)
		if err != nil {
			return "", fmt.Errorf("secret header %s for %s: %w", sp.Header, sp.Host, err)
		}
		return strings.TrimSuffix(string(b), "\n"), nil
	}
	v, ok := lookup(sp.Source)
	if !ok || v == "" {
		return "", fmt.Errorf("secret header %s for %s: $%s is not set where runtimectl runs; set it (the session never sees it) and start the session again", sp.Header, sp.Host, sp.Source)
	}
	return v, nil
}

// hostAddrs are the engine host's own addresses when the engine is this machine's (a unix
// socket): the proxies refuse them, as they refuse their gateways.
func (c *Client) hostAddrs() []string {
	if c.backend != "docker" {
		return nil
	}
	host := c.ctr.Host()
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host != "" && !strings.HasPrefix(host, "unix://") {
		return nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() {
			continue
		}
		out = append(out, p.Addr().Unmap().String())
	}
	return out
}

// EgressRefusals is what a session's egress proxy refused, as its log says.
type EgressRefusals struct {
	// Total and ByReason count every refusal since the proxy started (the last refusal line
	// carries the counts, including the refusals the proxy counted but did not log).
	Total    int64                   `json:"total"`
	ByReason map[egress.Reason]int64 `json:"by_reason"`
	// Lines are the refusals logged, oldest first (at most a few a second are).
	Lines []egress.LogLine `json:"lines"`
}

// egressLogMax bounds what is read of a proxy's log (Docker keeps at most 2 MiB of it).
const egressLogMax = 4 << 20

// EgressRefusals reads what the egress proxy of session name refused; a session without
// allowed hosts (or whose proxy is gone) has none.
func (c *Client) EgressRefusals(ctx context.Context, name string) (EgressRefusals, error) {
	out := EgressRefusals{ByReason: map[egress.Reason]int64{}}
	if err := ValidateName(name); err != nil {
		return out, err
	}
	if c.egr == nil {
		return out, nil
	}
	raw, err := c.egr.EgressLogs(ctx, name, egressLogMax)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return out, nil
		}
		return out, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		l, ok := egress.ParseLogLine(strings.TrimSpace(line))
		if !ok {
			continue
		}
		out.Lines = append(out.Lines, l)
		if l.Refusals != nil {
			out.ByReason = l.Refusals
		}
	}
	for _, n := range out.ByReason {
		out.Total += n
	}
	return out, nil
}

// withEgressLogs adds the refusals of a session's egress proxy to its agent's log, one line
// each (`session logs`).
func (c *Client) withEgressLogs(ctx context.Context, name string, agent []byte, max int64) ([]byte, error) {
	r, err := c.EgressRefusals(ctx, name)
	if err != nil || len(r.Lines) == 0 {
		return agent, nil // the agent's log stands on its own
	}
	var b strings.Builder
	for _, l := range r.Lines {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "egress: %d refusals in all\n", r.Total)
	tail := b.String()
	if int64(len(tail)) > max {
		tail = tail[int64(len(tail))-max:]
	}
	if keep := max - int64(len(tail)); int64(len(agent)) > keep {
		agent = agent[int64(len(agent))-keep:]
	}
	return append(agent, tail...), nil
}

// egressLabel adds contract.LabelAllowHosts to the labels of the runtime of a session with
// allowed hosts (the engine starts its proxy first, and gives it its policy).
func egressLabel(st Settings, labels map[string]string) map[string]string {
	if len(st.AllowHosts) == 0 {
		if labels == nil {
			labels = map[string]string{}
		}
		return labels
	}
	out := map[string]string{contract.LabelAllowHosts: "1"}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// adoptEgress makes a claimed member's proxy the session name's. When it cannot, the session
// made of the member is removed (the start then makes its own).
func (c *Client) adoptEgress(ctx context.Context, member, name string) error {
	a, ok := c.egr.(engine.EgressAdopter)
	var err error
	if !ok {
		err = fmt.Errorf("%w: the %s engine cannot hand a pool member's egress proxy to a session", ErrInvalid, c.backend)
	} else {
		err = a.AdoptEgress(ctx, member, name)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
		defer cancel()
		_ = c.ctr.Remove(cctx, name, true)
		_ = c.removeEgress(cctx, member)
		_ = c.vol.RemoveSession(cctx, name)
	}
	return err
}
