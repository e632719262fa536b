package server

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/go-units"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/session"
)

// Policy is what a token may ask of the server: ceilings on a session's limits, the values
// allowed for its network and image, the sessions it may have and the executions it may run at
// once. It comes from the token file: the built-in defaults (DefaultPolicy), then a `role
// default` line, then the token's role, then the token's own LIMIT=VALUE fields. A zero
// ceiling is unlimited; an admin token has no policy at all.
type Policy struct {
	Memory   int64    // bytes; memory=
	CPUs     float64  // cpus=
	Pids     int64    // pids=
	Disk     int64    // bytes; disk=
	Networks []string // network=none,bridge
	Images   []string // images=GLOB,GLOB (path.Match; the default image of each language is always allowed)
	Sessions int      // sessions=
	Execs    int      // execs= (serve --max-execs when not set)
	// AllowHosts are the hosts a session may be let reach by name (allow_hosts=GLOB,GLOB,
	// path.Match on the host, * for any; none by default, unlimited for any).
	AllowHosts []string
	// From says where the policy came from, for messages: "the built-in defaults", "role
	// small", "token alice".
	From map[string]string
}

// DefaultPolicy is the policy of a token that the token file says nothing about.
func DefaultPolicy() Policy {
	return Policy{
		Memory: 4 << 30, CPUs: 2, Pids: 1024, Disk: 20 << 30,
		Networks: []string{"none"}, Images: []string{"runtimectl/*"}, Sessions: 20,
		From: map[string]string{},
	}
}

// policyKeys are the LIMIT names of the token file, in the order messages list them.
var policyKeys = []string{"memory", "cpus", "pids", "disk", "network", "images", "allow_hosts", "sessions", "execs"}

// set applies one LIMIT=VALUE of the token file; from names the line's role or token.
func (p *Policy) set(key, val, from string) error {
	unlimited := val == "unlimited"
	var err error
	switch key {
	case "memory", "disk":
		var n int64
		if !unlimited {
			if n, err = units.RAMInBytes(val); err != nil || n <= 0 {
				return fmt.Errorf("%s=%s: give a size (512m, 4g) or unlimited", key, val)
			}
		}
		if key == "memory" {
			p.Memory = n
		} else {
			p.Disk = n
		}
	case "cpus":
		var f float64
		if !unlimited {
			if f, err = strconv.ParseFloat(val, 64); err != nil || f <= 0 {
				return fmt.Errorf("cpus=%s: give a positive number or unlimited", val)
			}
		}
		p.CPUs = f
	case "pids", "sessions", "execs":
		var n int64
		if !unlimited {
			if n, err = strconv.ParseInt(val, 10, 64); err != nil || n <= 0 {
				return fmt.Errorf("%s=%s: give a positive whole number or unlimited", key, val)
			}
		}
		switch key {
		case "pids":
			p.Pids = n
		case "sessions":
			p.Sessions = int(n)
		default:
			p.Execs = int(n)
		}
	case "network":
		p.Networks = nil
		for _, v := range strings.Split(val, ",") {
			if v != "none" && v != "bridge" {
				return fmt.Errorf("network=%s: give none, bridge or none,bridge", val)
			}
			p.Networks = append(p.Networks, v)
		}
	case "images":
		p.Images = nil
		if !unlimited {
			for _, g := range strings.Split(val, ",") {
				if _, err := path.Match(g, ""); err != nil || g == "" {
					return fmt.Errorf("images=%s: %q is not a glob (runtimectl/*, registry.example/team/*)", val, g)
				}
				p.Images = append(p.Images, g)
			}
		}
	case "allow_hosts":
		p.AllowHosts = nil
		switch val {
		case "unlimited":
			p.AllowHosts = []string{"*"}
		case "none":
		default:
			for _, g := range strings.Split(val, ",") {
				if _, err := path.Match(g, ""); err != nil || g == "" || strings.ContainsAny(g, "/:") {
					return fmt.Errorf("allow_hosts=%s: %q is not a host glob (pypi.org, *.pythonhosted.org, *), none or unlimited", val, g)
				}
				p.AllowHosts = append(p.AllowHosts, g)
			}
		}
	default:
		return fmt.Errorf("unknown limit %q: the limits are %s", key, strings.Join(policyKeys, ", "))
	}
	if p.From == nil {
		p.From = map[string]string{}
	}
	p.From[key] = from
	return nil
}

func (p Policy) clone() Policy {
	q := p
	q.Networks = append([]string(nil), p.Networks...)
	q.Images = append([]string(nil), p.Images...)
	q.AllowHosts = append([]string(nil), p.AllowHosts...)
	q.From = map[string]string{}
	for k, v := range p.From {
		q.From[k] = v
	}
	return q
}

// where says where a limit was set, for a 403.
func (p Policy) where(key string) string {
	from := p.From[key]
	if from == "" {
		from = "the built-in default"
	}
	return fmt.Sprintf("%s= in the token file, from %s", key, from)
}

// String is the policy as LIMIT=VALUE fields, as the token file would give them.
func (p Policy) String() string {
	val := func(n int64, f func(int64) string) string {
		if n == 0 {
			return "unlimited"
		}
		return f(n)
	}
	size := func(n int64) string { return units.BytesSize(float64(n)) }
	num := func(n int64) string { return strconv.FormatInt(n, 10) }
	cpus := "unlimited"
	if p.CPUs > 0 {
		cpus = strconv.FormatFloat(p.CPUs, 'g', -1, 64)
	}
	imgs := "unlimited"
	if len(p.Images) > 0 {
		imgs = strings.Join(p.Images, ",")
	}
	hosts := "none"
	if len(p.AllowHosts) > 0 {
		hosts = strings.Join(p.AllowHosts, ",")
	}
	return fmt.Sprintf("memory=%s cpus=%s pids=%s disk=%s network=%s images=%s allow_hosts=%s sessions=%s execs=%s",
		val(p.Memory, size), cpus, val(p.Pids, num), val(p.Disk, size), strings.Join(p.Networks, ","), imgs, hosts,
		val(int64(p.Sessions), num), val(int64(p.Execs), num))
}

// policyLimit is a request past a token's policy.
func policyLimit(p Policy, key, asked, limit string) error {
	return limitf("%s %s is over this token's limit of %s (%s); ask for less, or ask the operator to raise it", key, asked, limit, p.where(key))
}

// applyPolicy checks a start request against tok's policy, and where the request leaves a
// limit to the library's default and that default is over the ceiling, sets the ceiling.
func (s *Server) applyPolicy(tok Token, q *startRequest) error {
	a := ask{Memory: int64(q.Memory), Disk: int64(q.Disk), Pids: q.Pids, CPUs: q.CPUs, Network: q.Network, Image: q.Image, AllowHosts: q.AllowHosts}
	if err := s.admitAsk(tok, &a); err != nil {
		return err
	}
	q.Memory, q.Disk, q.Pids, q.CPUs = Size(a.Memory), Size(a.Disk), a.Pids, a.CPUs
	return nil
}

// admitSpec is applyPolicy for a session.Spec (the sessions that /mcp makes).
func (s *Server) admitSpec(tok Token, spec *session.Spec) error {
	if len(spec.SecretHeaders) > 0 && !tok.Admin {
		return limitf("secret headers name the server's own environment variables or files: only an admin token may give them; ask the server's operator")
	}
	a := ask{Memory: spec.Memory, Disk: spec.Disk, Pids: spec.Pids, CPUs: spec.CPUs, Network: spec.Network, Image: spec.Image, AllowHosts: spec.AllowHosts}
	if err := s.admitAsk(tok, &a); err != nil {
		return err
	}
	spec.Memory, spec.Disk, spec.Pids, spec.CPUs = a.Memory, a.Disk, a.Pids, a.CPUs
	return nil
}

// ask is what a new session asks of the policy, from either route.
type ask struct {
	Memory, Disk, Pids int64
	CPUs               float64
	Network, Image     string
	AllowHosts         []string
}

func (s *Server) admitAsk(tok Token, q *ask) error {
	if tok.Admin {
		return nil
	}
	p := tok.Policy
	size := func(n int64) string { return units.BytesSize(float64(n)) }
	ceil := func(key string, asked *int64, def, limit int64, show func(int64) string) error {
		if limit == 0 {
			return nil
		}
		if *asked == 0 && def > limit {
			*asked = limit
		}
		if *asked > limit {
			return policyLimit(p, key, show(*asked), show(limit))
		}
		return nil
	}
	if err := ceil("memory", &q.Memory, containers.DefaultMemory, p.Memory, size); err != nil {
		return err
	}
	if err := ceil("disk", &q.Disk, contract.DefaultDisk, p.Disk, size); err != nil {
		return err
	}
	if err := ceil("pids", &q.Pids, containers.DefaultPids, p.Pids, func(n int64) string { return strconv.FormatInt(n, 10) }); err != nil {
		return err
	}
	if p.CPUs > 0 {
		if q.CPUs == 0 && containers.DefaultCPUs > p.CPUs {
			q.CPUs = p.CPUs
		}
		if q.CPUs > p.CPUs {
			return policyLimit(p, "cpus", strconv.FormatFloat(q.CPUs, 'g', -1, 64), strconv.FormatFloat(p.CPUs, 'g', -1, 64))
		}
	}
	network := q.Network
	if network == "" {
		network = containers.DefaultNetwork
	}
	if !contains(p.Networks, network) {
		return limitf("network %s is not allowed for this token (allowed: %s; %s)", network, strings.Join(p.Networks, ", "), p.where("network"))
	}
	if q.Image != "" && len(p.Images) > 0 {
		ok := false
		for _, g := range p.Images {
			if m, _ := path.Match(g, q.Image); m {
				ok = true
			}
		}
		if !ok {
			return limitf("image %s is not allowed for this token (allowed: %s, and each language's default image; %s)", q.Image, strings.Join(p.Images, ", "), p.where("images"))
		}
	}
	for _, h := range q.AllowHosts {
		if !p.allowsHost(h) {
			allowed := "none"
			if len(p.AllowHosts) > 0 {
				allowed = strings.Join(p.AllowHosts, ", ")
			}
			return limitf("allow_hosts %s is not allowed for this token (allowed: %s; %s)", h, allowed, p.where("allow_hosts"))
		}
	}
	return nil
}

// allowsHost says whether the policy lets a session reach host by name (--allow-host): a
// host:port or host is matched by its host against the globs of allow_hosts=.
func (p Policy) allowsHost(h string) bool {
	host := strings.ToLower(h)
	if i := strings.LastIndex(host, ":"); i > 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	for _, g := range p.AllowHosts {
		if g == "*" {
			return true
		}
		if m, _ := path.Match(strings.ToLower(g), host); m {
			return true
		}
	}
	return false
}

// checkSessions refuses a new session to a token that has its limit of them.
func (s *Server) checkSessions(ctx context.Context, tok Token) error {
	if tok.Admin || tok.Policy.Sessions == 0 {
		return nil
	}
	owned, err := s.cfg.Client.ListWith(ctx, session.ListOptions{NoExecutions: true, Keep: func(in session.Info) bool { return in.Owner == tok.Name }})
	if err != nil {
		return err
	}
	if len(owned) >= tok.Policy.Sessions {
		names := make([]string, 0, len(owned))
		for _, in := range owned {
			names = append(names, in.Name)
		}
		sort.Strings(names)
		if len(names) > 5 {
			names = append(names[:5], "...")
		}
		return limitf("this token has %d sessions, its limit (%s); remove one first (%s)", len(owned), tok.Policy.where("sessions"), strings.Join(names, ", "))
	}
	return nil
}

// maxExecs is how many executions tok may run at once (0: no cap).
func (s *Server) maxExecs(tok Token) int {
	if tok.Admin {
		return 0
	}
	if tok.Policy.Execs > 0 {
		return tok.Policy.Execs
	}
	return s.cfg.MaxExecs
}

// execsWhere says where tok's cap of executions at once was set.
func (s *Server) execsWhere(tok Token) string {
	if tok.Policy.Execs > 0 {
		return tok.Policy.where("execs")
	}
	return "serve --max-execs"
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// lockStarts serializes the creation of tok's sessions, so that two starts at once cannot both
// pass its sessions limit; it returns the unlock.
func (s *Server) lockStarts(tok Token) func() {
	if tok.Admin || tok.Policy.Sessions == 0 {
		return func() {}
	}
	s.mu.Lock()
	m := s.startLocks[tok.Name]
	if m == nil {
		m = new(sync.Mutex)
		s.startLocks[tok.Name] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}
