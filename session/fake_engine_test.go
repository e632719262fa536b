package session

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
)

// fakeEngine is an engine.Engine in memory, in the style of agent/stub_test.go: a world of
// runtimes and volumes that behaves as an engine does (create, start, stop, remove, inspect,
// list; a stream to a fake agent that answers hello, status, drain, claim, snapshot and exec),
// and func fields that replace one call to make a branch happen (a create that races, a start
// on a network that is gone, an agent that never answers). Every call is logged in calls
// ("create s1", "start s1", ...), so that a test can say what the library asked.
type fakeEngine struct {
	t    testing.TB
	name string

	mu      sync.Mutex
	ctrs    map[string]*fakeRuntime
	vols    map[string]engine.Volume
	pools   map[string]string
	calls   []string
	started map[string]int // how many times each runtime was started

	// noPools makes Pools nil (an engine without warm pools); noImages makes the engine pull
	// images (no engine.ImageChecker); createStarts and stopRemoves are Kubernetes' traits.
	noPools, noImages         bool
	createStarts, stopRemoves bool
	// egress gives the engine egress proxies (engine.Egress); proxies are the ones it runs.
	egress  bool
	proxies map[string]engine.EgressSpec

	// Hooks: a non-nil one replaces the call (it may call the default, f.defaultX).
	createIfAbsent func(ctx context.Context, spec engine.Spec) (engine.Info, bool, error)
	start          func(ctx context.Context, name string) error
	dial           func(ctx context.Context, name string) (io.ReadWriteCloser, error)
	volCreate      func(ctx context.Context, name, lang, settings string, o engine.VolumeOptions) (engine.Volume, error)
	checkImage     func(ctx context.Context, ref string) error
	adopt          func(ctx context.Context, member, name, settings string) error
	// agent answers one request of the fake agent of session name; nil answers as an idle
	// agent does (see serveAgent). Returning false falls back to that.
	agent func(name string, srv *execproto.ServerConn, id uint32, req execproto.Request) bool
	// status is the agent's status reply (Status's fields) per session.
	status map[string]execproto.Status
}

// fakeRuntime is one runtime of the fake world.
type fakeRuntime struct {
	info  engine.Info
	spec  engine.Spec
	files map[string][]byte // path in the runtime: content (CopyTo, CopyFrom, Stat)
}

func newFakeEngine(t testing.TB) *fakeEngine {
	return &fakeEngine{
		t: t, name: "fake",
		ctrs: map[string]*fakeRuntime{}, vols: map[string]engine.Volume{}, pools: map[string]string{},
		started: map[string]int{}, status: map[string]execproto.Status{}, proxies: map[string]engine.EgressSpec{},
	}
}

// client returns a Client on f that refills no pools (tests wait for nothing in the background).
func (f *fakeEngine) client() *Client {
	c := NewWithEngine(f.engineFor(), WithoutPoolRefill())
	f.t.Cleanup(func() { c.Close() })
	return c
}

func (f *fakeEngine) log(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// called returns the calls logged so far whose words begin with one of prefixes (all with none).
func (f *fakeEngine) called(prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(c, p) }) {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeEngine) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// addSession puts a session in the world as Start would have made it: its volumes with st's
// settings and, unless state is "", a runtime in that state.
func (f *fakeEngine) addSession(st Settings, state engine.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st.Created.IsZero() {
		st.Created = time.Now().UTC()
	}
	f.vols[st.Session] = engine.Volume{Name: contract.VolumeName(st.Session), State: contract.StateVolumeName(st.Session),
		Session: st.Session, Lang: st.Lang, Settings: st.Encode(), Created: st.Created, Size: -1}
	if state != "" {
		spec := containerSpec(st)
		f.ctrs[st.Session] = &fakeRuntime{spec: spec, files: map[string][]byte{}, info: f.infoOf(spec, state)}
	}
}

func (f *fakeEngine) infoOf(spec engine.Spec, state engine.State) engine.Info {
	labels := map[string]string{contract.LabelSession: spec.Session, contract.LabelLang: spec.Lang}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	return engine.Info{ID: "id-" + spec.Session, Name: contract.NamePrefix + spec.Session, Session: spec.Session, Lang: spec.Lang,
		Image: spec.Image, State: state, Running: state == engine.StateRunning, Created: time.Now(), Labels: labels,
		StateMounted: spec.StateVolume != "" || f.createStarts}
}

// settingsOf is what a session made by Spec{Name: name, Lang: "bash"} records.
func settingsOf(t testing.TB, name string) Settings {
	st, err := Spec{Name: name, Lang: "bash"}.settings()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The engine.

func (f *fakeEngine) Name() string              { return f.name }
func (f *fakeEngine) Runtimes() engine.Runtimes { return fakeRuntimes{f} }
func (f *fakeEngine) Storage() engine.Storage   { return fakeStorage{f} }
func (f *fakeEngine) Close() error              { return nil }
func (f *fakeEngine) Pools() engine.Pools {
	if f.noPools {
		return nil
	}
	return fakePools{f}
}

// fakeImages is the fake engine with images it checks (engine.ImageChecker).
type fakeImages struct{ *fakeEngine }

func (f fakeImages) CheckImage(ctx context.Context, ref string) error {
	f.log("check-image %s", ref)
	if f.checkImage != nil {
		return f.checkImage(ctx, ref)
	}
	return nil
}

// fakeEgress is the fake engine with egress proxies (engine.Egress): it logs each call and
// keeps the spec it was given, which StartEgress asks for only when the proxy is new.
type fakeEgress struct{ fakeImages }

func (f fakeEgress) StartEgress(_ context.Context, session string, spec func() (engine.EgressSpec, error)) error {
	f.log("egress-start %s", session)
	f.mu.Lock()
	_, ok := f.proxies[session]
	f.mu.Unlock()
	if ok {
		return nil
	}
	s, err := spec()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.proxies[session] = s
	f.mu.Unlock()
	return nil
}

func (f fakeEgress) StopEgress(_ context.Context, session string, _ time.Duration) error {
	f.log("egress-stop %s", session)
	return nil
}

func (f fakeEgress) RemoveEgress(_ context.Context, session string) error {
	f.log("egress-remove %s", session)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.proxies, session)
	return nil
}

func (f fakeEgress) EgressLogs(context.Context, string, int64) ([]byte, error) { return nil, nil }

// engineFor returns the engine a Client sees: f, with engine.ImageChecker unless noImages, and
// engine.Egress with egress.
func (f *fakeEngine) engineFor() engine.Engine {
	if f.noImages {
		return f
	}
	if f.egress {
		return fakeEgress{fakeImages{f}}
	}
	return fakeImages{f}
}

// fakeRuntimes is the world's runtimes.
type fakeRuntimes struct{ f *fakeEngine }

func (r fakeRuntimes) Create(ctx context.Context, spec engine.Spec) (engine.Info, error) {
	in, _, err := r.CreateIfAbsent(ctx, spec)
	return in, err
}

func (r fakeRuntimes) CreateIfAbsent(ctx context.Context, spec engine.Spec) (engine.Info, bool, error) {
	r.f.log("create %s", spec.Session)
	if r.f.createIfAbsent != nil {
		return r.f.createIfAbsent(ctx, spec)
	}
	return r.f.defaultCreate(spec)
}

func (f *fakeEngine) defaultCreate(spec engine.Spec) (engine.Info, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.ctrs[spec.Session]; ok {
		return c.info, false, nil
	}
	state := engine.StateCreated
	if f.createStarts {
		state = engine.StateRunning
	}
	c := &fakeRuntime{spec: spec, files: map[string][]byte{}, info: f.infoOf(spec, state)}
	f.ctrs[spec.Session] = c
	return c.info, true, nil
}

func (r fakeRuntimes) Start(ctx context.Context, name string) error {
	r.f.log("start %s", name)
	if r.f.start != nil {
		return r.f.start(ctx, name)
	}
	return r.f.defaultStart(name)
}

func (f *fakeEngine) defaultStart(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[name]
	if !ok {
		return fmt.Errorf("start %s: %w", name, engine.ErrNotFound)
	}
	c.info.State, c.info.Running = engine.StateRunning, true
	f.started[name]++
	return nil
}

func (r fakeRuntimes) Stop(_ context.Context, name string, _ time.Duration) error {
	r.f.log("stop %s", name)
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if c, ok := r.f.ctrs[name]; ok {
		if r.f.stopRemoves {
			delete(r.f.ctrs, name)
		} else {
			c.info.State, c.info.Running = engine.StateExited, false
		}
	}
	return nil
}

func (r fakeRuntimes) Remove(_ context.Context, name string, _ bool) error {
	r.f.log("remove %s", name)
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	delete(r.f.ctrs, name)
	return nil
}

func (r fakeRuntimes) Inspect(_ context.Context, name string) (engine.Info, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if c, ok := r.f.ctrs[name]; ok {
		return c.info, nil
	}
	return engine.Info{}, fmt.Errorf("runtime %s: %w", name, engine.ErrNotFound)
}

func (r fakeRuntimes) List(context.Context) ([]engine.Info, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	var out []engine.Info
	for _, c := range r.f.ctrs {
		out = append(out, c.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out, nil
}

func (r fakeRuntimes) Dial(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	r.f.log("dial %s", name)
	if r.f.dial != nil {
		return r.f.dial(ctx, name)
	}
	return r.f.defaultDial(name)
}

func (f *fakeEngine) defaultDial(name string) (io.ReadWriteCloser, error) {
	in, err := fakeRuntimes{f}.Inspect(context.Background(), name)
	if err != nil {
		return nil, err
	}
	if !in.Running {
		return nil, fmt.Errorf("dial %s: not running", name)
	}
	client, server := net.Pipe()
	go f.serveAgent(name, in.Lang, server)
	return client, nil
}

// serveAgent is the fake agent of session name on one stream: hello, then an answer to every
// request as an idle agent gives it (status and drain: f.status[name]; claim: claimed; snapshot:
// saved; exec: ok with no output), unless f.agent answers it.
func (f *fakeEngine) serveAgent(name, lang string, conn net.Conn) {
	defer conn.Close()
	srv, err := execproto.NewServerConn(conn, execproto.Hello{Agent: "fake", Lang: lang, Session: name})
	if err != nil {
		return
	}
	for {
		fr, err := srv.Next()
		if err != nil {
			return
		}
		if fr.Type != execproto.TypeRequest {
			continue
		}
		var req execproto.Request
		if err := json.Unmarshal(fr.Payload, &req); err != nil {
			_ = srv.SendError(fr.ID, "bad-request", err.Error())
			continue
		}
		f.log("agent %s %s", name, req.Op)
		if f.agent != nil && f.agent(name, srv, fr.ID, req) {
			continue
		}
		f.mu.Lock()
		status := f.status[name]
		f.mu.Unlock()
		switch req.Op {
		case execproto.OpStatus, execproto.OpDrain:
			_ = srv.SendJSON(execproto.TypeReply, fr.ID, status)
		case execproto.OpClaim:
			_ = srv.SendJSON(execproto.TypeReply, fr.ID, execproto.ClaimReply{Claimed: true})
		case execproto.OpSnapshot:
			_ = srv.SendJSON(execproto.TypeReply, fr.ID, execproto.SnapshotReply{})
		case execproto.OpExec:
			_ = srv.SendJSON(execproto.TypeResult, fr.ID, execproto.Result{Seq: status.NextSeq, Status: contract.StatusOK})
		default:
			_ = srv.SendError(fr.ID, "unknown-op", "the fake agent does not do "+req.Op)
		}
	}
}

func (r fakeRuntimes) CopyTo(_ context.Context, name, dir string, content io.Reader) error {
	r.f.log("copy-to %s %s", name, dir)
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	c, ok := r.f.ctrs[name]
	if !ok {
		return fmt.Errorf("copy into %s: %w", name, engine.ErrNotFound)
	}
	tr := tar.NewReader(content)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(tr)
		c.files[strings.TrimSuffix(dir, "/")+"/"+strings.TrimPrefix(h.Name, "./")] = b
	}
}

func (r fakeRuntimes) CopyFrom(_ context.Context, name, p string) (io.ReadCloser, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	c, ok := r.f.ctrs[name]
	if !ok {
		return nil, fmt.Errorf("copy from %s: %w", name, engine.ErrNotFound)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	found := false
	for fp, b := range c.files {
		if fp == p || strings.HasPrefix(fp, p+"/") {
			found = true
			rel := strings.TrimPrefix(fp, p[:strings.LastIndex(p, "/")+1])
			_ = tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(b))})
			_, _ = tw.Write(b)
		}
	}
	if !found {
		return nil, fmt.Errorf("copy %s from %s: %w", p, name, engine.ErrNotFound)
	}
	_ = tw.Close()
	return io.NopCloser(&buf), nil
}

func (r fakeRuntimes) Stat(_ context.Context, name, p string) (engine.PathInfo, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	c, ok := r.f.ctrs[name]
	if !ok {
		return engine.PathInfo{}, fmt.Errorf("stat in %s: %w", name, engine.ErrNotFound)
	}
	b, ok := c.files[p]
	return engine.PathInfo{Exists: ok, Size: int64(len(b))}, nil
}

func (r fakeRuntimes) Host() string { return "fake://" }
func (r fakeRuntimes) About(context.Context) (engine.About, error) {
	return engine.About{Name: "Fake"}, nil
}
func (r fakeRuntimes) CreateStarts() bool { return r.f.createStarts }
func (r fakeRuntimes) StopRemoves() bool  { return r.f.stopRemoves }

// fakeStorage is the world's volumes.
type fakeStorage struct{ f *fakeEngine }

func (s fakeStorage) Create(ctx context.Context, name, lang, settings string, o engine.VolumeOptions) (engine.Volume, error) {
	s.f.log("volume-create %s", name)
	if s.f.volCreate != nil {
		return s.f.volCreate(ctx, name, lang, settings, o)
	}
	return s.f.defaultVolCreate(name, lang, settings, o)
}

func (f *fakeEngine) defaultVolCreate(name, lang, settings string, o engine.VolumeOptions) (engine.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.vols[name]; ok {
		return v, nil
	}
	v := engine.Volume{Name: contract.VolumeName(name), State: contract.StateVolumeName(name), Session: name, Lang: lang,
		Settings: settings, Created: time.Now().UTC(), Size: -1, Pool: o.Labels[contract.LabelPool]}
	f.vols[name] = v
	return v, nil
}

func (s fakeStorage) EnsureState(context.Context, string) (bool, error) { return false, nil }

func (s fakeStorage) Inspect(_ context.Context, name string) (engine.Volume, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if v, ok := s.f.vols[name]; ok {
		return v, nil
	}
	return engine.Volume{}, fmt.Errorf("volume %s: %w", name, engine.ErrNotFound)
}

func (s fakeStorage) Remove(_ context.Context, vol string) error {
	s.f.log("volume-remove %s", vol)
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	for k, v := range s.f.vols {
		if v.Name == vol {
			if _, used := s.f.ctrs[k]; used {
				return fmt.Errorf("remove %s: %w", vol, engine.ErrInUse)
			}
			delete(s.f.vols, k)
		}
	}
	return nil
}

func (s fakeStorage) RemoveSession(_ context.Context, name string) error {
	s.f.log("volume-remove-session %s", name)
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	delete(s.f.vols, name)
	return nil
}

func (s fakeStorage) RemoveState(context.Context, string) error { return nil }

func (s fakeStorage) List(context.Context, bool) ([]engine.Volume, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	var out []engine.Volume
	for _, v := range s.f.vols {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out, nil
}

// fakePools is the world's warm pools: their settings by name, and an adopt that moves a
// member's runtime and volumes to the session's name.
type fakePools struct{ f *fakeEngine }

func (p fakePools) SavePool(_ context.Context, name, config string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.pools[name] = config
	return nil
}

func (p fakePools) LoadPools(context.Context) ([]string, error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	var out []string
	for _, c := range p.f.pools {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

func (p fakePools) DeletePool(_ context.Context, name string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	delete(p.f.pools, name)
	return nil
}

func (p fakePools) Adopt(ctx context.Context, member, name, settings string) error {
	p.f.log("adopt %s %s", member, name)
	if p.f.adopt != nil {
		return p.f.adopt(ctx, member, name, settings)
	}
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	c, ok := p.f.ctrs[member]
	if !ok {
		return fmt.Errorf("adopt %s: %w", member, engine.ErrNotFound)
	}
	if _, taken := p.f.ctrs[name]; taken {
		return fmt.Errorf("adopt %s as %s: %w", member, name, engine.ErrConflict)
	}
	delete(p.f.ctrs, member)
	c.info.Session, c.info.Name = name, contract.NamePrefix+name
	delete(c.info.Labels, contract.LabelPool)
	delete(c.info.Labels, contract.LabelPoolConfig)
	p.f.ctrs[name] = c
	v := p.f.vols[member]
	delete(p.f.vols, member)
	v.Session, v.Settings, v.Pool = name, settings, ""
	p.f.vols[name] = v
	return nil
}
