package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// A warm pool keeps Size sessions of one kind ready before any start asks for them: container
// and volumes made, interpreter started (and its Preload run), hardened as every session is.
// Its members are named poolPrefix+POOL+"."+RANDOM, which no session name can be, so that
// `session ls` does not show them and no command takes them by name. A Start of a new session
// whose settings a pool serves claims a member instead of making one: it renames the member's
// container (atomic: of two starts, one gets it), creates the session's volumes as binds of the
// member's (so that the session is found, recreated and removed by its own name) and refills
// the pool. A claimed session is a session in every way: its history starts at 1, it snapshots,
// stops, starts and is removed like any other. Where pools and claims are kept is the engine's
// part (Pools): Docker renames the container, Kubernetes relabels the pod and its claims.

// poolPrefix begins the session names of pool members: ValidateName refuses it.
const poolPrefix = "_pool."

// DefaultPoolTTL is how long a member waits for a start before it is made again.
const DefaultPoolTTL = time.Hour

// poolRE is what a pool's name may be (it goes into its members' container and volume names).
var poolRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,29}[a-z0-9])?$`)

// Pool is a warm pool's settings: what its members are (the settings a start must ask for to be
// served from it: the language, image and limits here, every other setting at its default, no
// environment, no TTL), how many it keeps ready, what their interpreter runs at start.
type Pool struct {
	Name    string  `json:"name"`
	Lang    string  `json:"lang"`
	Image   string  `json:"image,omitempty"` // "": the language's image
	Memory  int64   `json:"memory,omitempty"`
	CPUs    float64 `json:"cpus,omitempty"`
	Pids    int64   `json:"pids,omitempty"`
	Size    int     `json:"size"`
	Preload string  `json:"preload,omitempty"` // Python code run at each interpreter start (Settings.Preload)
	// TTL: a member that waited this long for a start is made again (0: DefaultPoolTTL).
	TTL time.Duration `json:"ttl,omitempty"`
	// AllowHosts are the members' Spec.AllowHosts: each has its egress proxy ready, and serves
	// starts with the same allowed hosts (Docker only).
	AllowHosts []string `json:"allow_hosts,omitempty"`
}

// PoolStatus is a pool and its members.
type PoolStatus struct {
	Pool
	Ready   int `json:"ready"`   // members running, waiting for a start
	Waiting int `json:"waiting"` // members being made (or broken: the next fill removes them)
}

func (p Pool) ttl() time.Duration {
	if p.TTL <= 0 {
		return DefaultPoolTTL
	}
	return p.TTL
}

// spec is the session Spec a member is made from (its name a placeholder).
func (p Pool) spec() Spec {
	return Spec{Name: "pool-member", Lang: p.Lang, Image: p.Image, Memory: p.Memory, CPUs: p.CPUs, Pids: p.Pids, AllowHosts: p.AllowHosts}
}

// poolKey is what a start's settings and a pool's members must have in common for the start
// to be served from the pool: every setting but the name, the times, the owner and the test run.
func poolKey(st Settings) string {
	st.Session, st.Owner, st.TestRun, st.Preload = "", "", "", ""
	st.Created = time.Time{}
	b, _ := json.Marshal(st)
	return string(b)
}

// hash names a pool's settings on its members (LabelPoolConfig), so that a `pool set` that
// changes them has the members made before it made again.
func (p Pool) hash() (string, error) {
	st, err := p.spec().settings()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(poolKey(st) + "\x00" + p.Preload))
	return hex.EncodeToString(sum[:8]), nil
}

var advisePools = advice.Words{Lib: "Client.Pools lists the pools", CLI: "`runtimectl pool ls` lists the pools"}

// pools is the client's cache of the engine's pools, so that starting a session asks the engine
// for them at most every few seconds.
type pools struct {
	mu      sync.Mutex
	at      time.Time
	list    []Pool
	refill  bool // Start refills a pool it took from, in the background (the default)
	filling sync.WaitGroup
	// fill serializes this client's fills (two starts' refills would make a member each for the
	// same gap); fills of other processes at the same moment can overfill, and the next trims.
	fill sync.Mutex
	// conns are the streams to the members this client made, kept open: a claim by this client
	// (the library's, serve's) skips the exec of a new relay, the bulk of a claim's cost.
	conns  map[string]*Session
	connAt map[string]time.Time // when each was made
}

// keepConn keeps the stream to a member this client made.
func (c *Client) keepConn(member string, s *Session) {
	c.pools.mu.Lock()
	defer c.pools.mu.Unlock()
	if c.pools.conns == nil {
		c.pools.conns, c.pools.connAt = map[string]*Session{}, map[string]time.Time{}
	}
	c.pools.conns[member], c.pools.connAt[member] = s, time.Now()
}

// takeConn returns the kept stream to member, still open, or nil.
func (c *Client) takeConn(member string) *Session {
	c.pools.mu.Lock()
	s := c.pools.conns[member]
	delete(c.pools.conns, member)
	delete(c.pools.connAt, member)
	c.pools.mu.Unlock()
	if s != nil && s.live() == nil {
		s.Close()
		return nil
	}
	return s
}

// keptMembers returns the members of pool with settings hash that this client holds streams
// to, as if listed: running, made now.
func (c *Client) keptMembers(pool, hash string) []engine.Info {
	c.pools.mu.Lock()
	defer c.pools.mu.Unlock()
	var out []engine.Info
	for name := range c.pools.conns {
		if strings.HasPrefix(name, poolPrefix+pool+".") {
			out = append(out, engine.Info{Session: name, Running: true, Created: c.pools.connAt[name],
				Labels: map[string]string{contract.LabelPoolConfig: hash}})
		}
	}
	return out
}

// closeConns closes the kept streams (Client.Close).
func (c *Client) closeConns() {
	c.pools.mu.Lock()
	conns := c.pools.conns
	c.pools.conns, c.pools.connAt = nil, nil
	c.pools.mu.Unlock()
	for _, s := range conns {
		s.Close()
	}
}

const poolCacheTTL = 2 * time.Second

func (c *Client) pooled(what string) error {
	if c.poolEng == nil {
		return fmt.Errorf("%w: %s: the %s backend keeps no warm pools (its engine has no Pools); use the docker or kubernetes backend", ErrInvalid, what, c.backend)
	}
	return nil
}

// SetPool creates the pool p, or changes it (members made with other settings are made again
// by the next fill). It makes no member itself: FillPool does.
func (c *Client) SetPool(ctx context.Context, p Pool) error {
	if err := c.pooled("pool " + p.Name); err != nil {
		return err
	}
	if !poolRE.MatchString(p.Name) {
		return fmt.Errorf("%w pool name %q: use up to 31 lowercase letters, digits and dashes, beginning and ending with a letter or digit", ErrInvalid, p.Name)
	}
	if p.Size < 0 || p.Size > 500 {
		return fmt.Errorf("%w pool size %d: give 0 to 500", ErrInvalid, p.Size)
	}
	if p.Lang == "" {
		p.Lang = "python"
	}
	if p.Preload != "" && p.Lang != "python" {
		return fmt.Errorf("%w preload for a %s pool: preloading is for Python only", ErrInvalid, p.Lang)
	}
	st, err := p.spec().settings()
	if err != nil {
		return err
	}
	if _, ok := c.eng.(engine.EgressAdopter); len(st.AllowHosts) > 0 && !ok {
		return advice.Errorf("%w pool %s: pools of sessions with %s are kept on Docker only for now", ErrInvalid, p.Name, flag("AllowHosts", "--allow-host"))
	}
	if err := c.checkImage(ctx, st); err != nil {
		return err
	}
	raw, _ := json.Marshal(p)
	if err := c.poolEng.SavePool(ctx, p.Name, string(raw)); err != nil {
		return err
	}
	c.pools.mu.Lock()
	c.pools.at = time.Time{}
	c.pools.mu.Unlock()
	return nil
}

// Pools returns the engine's pools with their members counted.
func (c *Client) Pools(ctx context.Context) ([]PoolStatus, error) {
	if err := c.pooled("pools"); err != nil {
		return nil, err
	}
	ps, err := c.readPools(ctx)
	if err != nil {
		return nil, err
	}
	ctrs, err := c.ctr.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PoolStatus, 0, len(ps))
	for _, p := range ps {
		s := PoolStatus{Pool: p}
		for _, m := range members(ctrs, p.Name) {
			if m.Running {
				s.Ready++
			} else {
				s.Waiting++
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *Client) readPools(ctx context.Context) ([]Pool, error) {
	raw, err := c.poolEng.LoadPools(ctx)
	if err != nil {
		return nil, err
	}
	var out []Pool
	for _, r := range raw {
		var p Pool
		if err := json.Unmarshal([]byte(r), &p); err != nil || p.Name == "" {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemovePool removes the pool and the members no start has taken (also members left by a fill
// that ran on after an earlier removal).
func (c *Client) RemovePool(ctx context.Context, name string) error {
	if err := c.pooled("pool " + name); err != nil {
		return err
	}
	ps, err := c.readPools(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, p := range ps {
		found = found || p.Name == name
	}
	ctrs, err := c.ctr.List(ctx)
	if err != nil {
		return err
	}
	ms := members(ctrs, name)
	if !found && len(ms) == 0 {
		return advice.Errorf("%w pool %q: %s", ErrNotFound, name, advisePools)
	}
	if err := c.poolEng.DeletePool(ctx, name); err != nil {
		return err
	}
	var errs []error
	for _, m := range ms {
		errs = append(errs, c.removeMember(ctx, m.Session))
	}
	return errors.Join(errs...)
}

// members are the containers of pool's members, oldest first.
func members(ctrs []engine.Info, pool string) []engine.Info {
	var out []engine.Info
	for _, ci := range ctrs {
		if strings.HasPrefix(ci.Session, poolPrefix+pool+".") {
			out = append(out, ci)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

func (c *Client) removeMember(ctx context.Context, member string) error {
	if s := c.takeConn(member); s != nil {
		s.Close()
	}
	if err := c.ctr.Remove(ctx, member, true); err != nil {
		return err
	}
	if err := c.removeEgress(ctx, member); err != nil {
		return err
	}
	return c.vol.RemoveSession(ctx, member)
}

// FillPool brings the pool to its size: it removes the members that waited past the pool's TTL,
// were made with other settings, or are not running (made by a fill that did not finish), and
// those past the size, then makes the missing ones, each ready (its interpreter answering)
// before it counts. It returns how many it made and removed.
func (c *Client) FillPool(ctx context.Context, name string) (made, removed int, err error) {
	if err := c.pooled("pool " + name); err != nil {
		return 0, 0, err
	}
	c.pools.fill.Lock()
	defer c.pools.fill.Unlock()
	ps, err := c.readPools(ctx)
	if err != nil {
		return 0, 0, err
	}
	var p *Pool
	for i := range ps {
		if ps[i].Name == name {
			p = &ps[i]
		}
	}
	if p == nil {
		return 0, 0, advice.Errorf("%w pool %q: %s", ErrNotFound, name, advisePools)
	}
	hash, err := p.hash()
	if err != nil {
		return 0, 0, err
	}
	ctrs, err := c.ctr.List(ctx)
	if err != nil {
		return 0, 0, err
	}
	ready := 0
	for _, m := range members(ctrs, p.Name) {
		stale := time.Since(m.Created) > p.ttl() || m.Labels[contract.LabelPoolConfig] != hash ||
			(!m.Running && time.Since(m.Created) > c.memberStartGrace()) || (m.Running && ready >= p.Size)
		if !stale {
			if m.Running {
				ready++
			}
			continue
		}
		if err := c.removeMember(ctx, m.Session); err != nil {
			return made, removed, err
		}
		removed++
	}
	for ; ready < p.Size; ready++ {
		if err := c.makeMember(ctx, *p, hash); err != nil {
			return made, removed, err
		}
		made++
	}
	return made, removed, nil
}

// memberStartGrace is how long a member may take to run before a fill takes it for one that a
// fill left unfinished: a container starts in seconds, a pod may wait for its image and claims.
func (c *Client) memberStartGrace() time.Duration {
	if c.ctr.CreateStarts() {
		return 6 * time.Minute
	}
	return time.Minute
}

// makeMember makes one member of p and waits until its interpreter answers.
func (c *Client) makeMember(ctx context.Context, p Pool, hash string) error {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := poolPrefix + p.Name + "." + hex.EncodeToString(b)
	st, err := p.spec().settings()
	if err != nil {
		return err
	}
	st.Session, st.Preload = name, p.Preload
	labels := map[string]string{contract.LabelPool: p.Name, contract.LabelPoolConfig: hash}
	if err := c.ensureNetwork(ctx, st.Network); err != nil {
		return err
	}
	if _, err := c.vol.Create(ctx, name, st.Lang, st.Encode(), engine.VolumeOptions{Labels: labels}); err != nil {
		return err
	}
	cs := containerSpec(st)
	cs.Labels = egressLabel(st, nil)
	for k, v := range labels {
		cs.Labels[k] = v
	}
	undo := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
		defer cancel()
		_ = c.removeMember(cctx, name)
	}
	if err := c.startEgress(ctx, st); err != nil {
		undo()
		return err
	}
	if _, _, err := c.ctr.CreateIfAbsent(ctx, cs); err != nil {
		undo()
		return err
	}
	if err := c.ctr.Start(ctx, name); err != nil {
		undo()
		return err
	}
	s := &Session{c: c, name: name, lang: st.Lang}
	if err := s.connect(ctx); err != nil {
		undo()
		return fmt.Errorf("pool %s: a new member did not answer: %w", p.Name, err)
	}
	c.keepConn(name, s)
	return nil
}

// poolFor returns the pool that serves a new session with settings st, if any.
func (c *Client) poolFor(ctx context.Context, spec Spec, st Settings) (Pool, bool) {
	if c.poolEng == nil || len(spec.VolumeOpts) > 0 || len(spec.StateVolumeOpts) > 0 {
		return Pool{}, false
	}
	c.pools.mu.Lock()
	if time.Since(c.pools.at) > poolCacheTTL {
		if ps, err := c.readPools(ctx); err == nil {
			c.pools.list, c.pools.at = ps, time.Now()
		}
	}
	list := c.pools.list
	c.pools.mu.Unlock()
	key := poolKey(st)
	for _, p := range list {
		if p.Size == 0 {
			continue
		}
		pst, err := p.spec().settings()
		if err == nil && poolKey(pst) == key {
			return p, true
		}
	}
	return Pool{}, false
}

// claim makes the new session spec.Name of a ready member of a pool that serves its settings
// st, when there is one, and returns it and the pool's name; nil leaves the start to make the
// session itself. The member's agent is asked first (OpClaim), over the stream the session then
// keeps: it says yes once, so that two starts never take one member (Docker's rename alone
// would let a start that looked the member up before another renamed it rename it again).
func (c *Client) claim(ctx context.Context, spec Spec, st Settings) (*Session, string) {
	p, found := c.poolFor(ctx, spec, st)
	if !found {
		return nil, ""
	}
	hash, err := p.hash()
	if err != nil {
		return nil, ""
	}
	defer c.refillLater(p.Name)
	// The members this client made and holds streams to come first, without asking the engine
	// for its containers (the labels say they are ready and of these settings); then the rest.
	ms := c.keptMembers(p.Name, hash)
	if len(ms) == 0 {
		ctrs, err := c.ctr.List(ctx)
		if err != nil {
			return nil, ""
		}
		ms = members(ctrs, p.Name)
	}
	// In an order of its own: starts at the same moment try different members first, instead of
	// each asking the oldest's agent, then the next (n starts would make n²/2 connections).
	mrand.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	for _, m := range ms {
		if !m.Running || m.Labels[contract.LabelPoolConfig] != hash || time.Since(m.Created) > p.ttl() {
			continue
		}
		s := c.takeConn(m.Session)
		if s == nil {
			s = &Session{c: c, name: m.Session}
			if err := s.connect(ctx); err != nil {
				continue // gone, or taken and renamed already
			}
		}
		if err := s.live().Call(ctx, execproto.Request{Op: execproto.OpClaim, Name: spec.Name}, nil); err != nil {
			s.Close()
			continue // another start's
		}
		if err := c.adopt(ctx, s, m.Session, spec.Name, st); err != nil {
			c.logger.Warn("pool: a claimed member could not be used; making the session instead", "pool", p.Name, "member", m.Session, "err", err)
			return nil, ""
		}
		return s, p.Name
	}
	return nil, ""
}

// adopt makes the member, which its agent says s's start has claimed, the session name (the
// engine's Adopt), with the session's settings: the member's, named name, made now, with the
// start's owner and test run. On failure nothing of the member is left.
func (c *Client) adopt(ctx context.Context, s *Session, member, name string, asked Settings) error {
	mv, err := c.vol.Inspect(ctx, member)
	if err == nil {
		var st Settings
		if st, err = decodeSettings(mv.Settings); err == nil {
			st.Session, st.Created, st.Owner, st.TestRun = name, time.Now().UTC(), asked.Owner, asked.TestRun
			if err = c.poolEng.Adopt(ctx, member, name, st.Encode()); err == nil && len(st.AllowHosts) > 0 {
				err = c.adoptEgress(ctx, member, name)
			}
			if err == nil {
				s.mu.Lock()
				s.name = name
				s.mu.Unlock()
				return nil
			}
		}
	}
	s.Close()
	// Claimed: no other start may take it. The engine's Adopt undid what it had done.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
	defer cancel()
	_ = c.ctr.Remove(cctx, member, true)
	_ = c.removeEgress(cctx, member)
	_ = c.vol.RemoveSession(cctx, member)
	return err
}

// refillLater refills the pool in the background, unless the client was told not to
// (WithoutPoolRefill: the CLI starts a process of its own for it).
func (c *Client) refillLater(pool string) {
	c.pools.mu.Lock()
	refill := c.pools.refill
	c.pools.mu.Unlock()
	if !refill {
		return
	}
	c.pools.filling.Add(1)
	go func() {
		defer c.pools.filling.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, _, err := c.FillPool(ctx, pool); err != nil {
			c.logger.Warn("pool: refill", "pool", pool, "err", err)
		}
	}()
}

// WaitRefills waits for the pool refills this client started in the background.
func (c *Client) WaitRefills() { c.pools.filling.Wait() }

// isPoolMember says whether a session name is a pool member's.
func isPoolMember(name string) bool { return strings.HasPrefix(name, poolPrefix) }

// gcPools takes the warm pools' members out of what GC looks at (they are not sessions) and,
// with orphans, removes what no pool needs: members of a pool that is gone or that waited past
// their pool's TTL, and member volumes that neither a member's container uses nor a claimed
// session binds (a fill that did not finish).
func (c *Client) gcPools(ctx context.Context, o GCOptions, ctrs []engine.Info, vols []engine.Volume, do func(GCAction, func() error)) ([]engine.Info, []engine.Volume) {
	var sessCtrs []engine.Info
	memberCtr := map[string]engine.Info{}
	for _, ci := range ctrs {
		if isPoolMember(ci.Session) {
			memberCtr[ci.Session] = ci
			continue
		}
		sessCtrs = append(sessCtrs, ci)
	}
	var sessVols, memberVols []engine.Volume
	backing := map[string]bool{}
	for _, v := range vols {
		for _, b := range v.Backing {
			backing[b] = true
		}
		if isPoolMember(v.Session) {
			memberVols = append(memberVols, v)
			continue
		}
		sessVols = append(sessVols, v)
	}
	if !o.Orphans || c.poolEng == nil {
		return sessCtrs, sessVols
	}
	ttl := map[string]time.Duration{}
	if ps, err := c.readPools(ctx); err == nil {
		for _, p := range ps {
			ttl[p.Name] = p.ttl()
		}
	} else {
		return sessCtrs, sessVols // cannot tell which pools exist: leave their members alone
	}
	for name, ci := range memberCtr {
		pool := ci.Labels[contract.LabelPool]
		limit, ok := ttl[pool]
		switch {
		case !ok:
			do(GCAction{Session: name, Action: "remove pool member", Reason: fmt.Sprintf("its pool %q is gone", pool)},
				func() error { return c.removeMember(ctx, name) })
		case time.Since(ci.Created) > limit:
			do(GCAction{Session: name, Action: "remove pool member", Reason: fmt.Sprintf("it waited %s for a start, past its pool's TTL of %s (the next fill makes a new one)", time.Since(ci.Created).Round(time.Second), limit)},
				func() error { return c.removeMember(ctx, name) })
		}
	}
	for _, v := range memberVols {
		if _, ok := memberCtr[v.Session]; ok || backing[v.Name] || time.Since(v.Created) < time.Minute {
			continue
		}
		name := v.Session
		do(GCAction{Session: name, Action: "remove pool member", Reason: "its volumes have no container, and no session claimed from its pool binds them"},
			func() error { return c.vol.RemoveSession(ctx, name) })
	}
	return sessCtrs, sessVols
}
