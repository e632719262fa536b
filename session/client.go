package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/snapshot"
)

// Client manages sessions on one engine (package engine: docker.New, kube.New).
type Client struct {
	eng     engine.Engine
	ctr     Runtimes
	vol     Storage
	backend string
	closer  io.Closer
	logger  *slog.Logger
	// callTimeout bounds short engine API calls; streams live as long as the caller's context.
	callTimeout time.Duration
	pools       pools
	poolEng     Pools  // nil: the engine keeps no warm pools
	egr         Egress // nil: the engine runs no egress proxies
	egress      EgressOptions
	// installBuilds lets every install of this Client build sdists (WithInstallBuilds).
	installBuilds bool
	// installIndex is the index of installs that name none (WithInstallIndex).
	installIndex installIndex
	// ownersOnce asks the engine once whether its archives keep owners (SessionOwns).
	ownersOnce  sync.Once
	keepsOwners bool
}

type options struct {
	installBuilds bool
	installIndex  installIndex
	logger        *slog.Logger
	noRefill      bool
	egress        EgressOptions
}

// WithoutPoolRefill keeps Start from refilling in the background a warm pool it took a member
// from: for a process that ends right after its call (the CLI starts a refill of its own).
func WithoutPoolRefill() Option { return func(o *options) { o.noRefill = true } }

// Option configures a Client.
type Option func(*options)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// NewWithEngine returns a Client on e: docker.New's engine for Docker (and Podman), kube.New's
// for Kubernetes. Close closes e.
func NewWithEngine(e engine.Engine, opts ...Option) *Client {
	o := options{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{eng: e, ctr: e.Runtimes(), vol: e.Storage(), poolEng: e.Pools(), egress: o.egress, installBuilds: o.installBuilds, installIndex: o.installIndex, backend: e.Name(), closer: e, logger: o.logger, callTimeout: 30 * time.Second}
	c.egr, _ = e.(engine.Egress) // nil: the engine runs no egress proxies
	c.pools.refill = !o.noRefill
	return c
}

// Close releases the client's connections to the engine (and the streams it keeps open to the
// warm pool members it made).
func (c *Client) Close() error {
	c.closeConns()
	return c.closer.Close()
}

// Backend names the engine: docker or kubernetes.
func (c *Client) Backend() string { return c.backend }

// Underlying returns the engine the client runs on, for what only that engine does
// (docker.From(c).Containers(), say).
func (c *Client) Underlying() engine.Engine { return c.eng }

// Runtimes returns the sessions' runtimes (containers, pods), for the commands and the server.
func (c *Client) Runtimes() Runtimes { return c.ctr }

// Storage returns the sessions' volumes, for `runtimectl volume`.
func (c *Client) Storage() Storage { return c.vol }

// Spec describes a new session. Zero values take the defaults.
type Spec struct {
	Name    string
	Lang    string  // python (default) or bash
	Image   string  // default: runtimectl's image for Lang
	Memory  int64   // bytes; default 2 GiB
	CPUs    float64 // default 1 (engine.DefaultCPUs)
	Pids    int64   // default 512
	Network string
	Env     []string // KEY=VALUE
	// Snapshot is "every" (default: after every execution that may have changed state) or
	// "manual".
	Snapshot      string
	KeepSnapshots int
	MaxOutput     int64
	// Disk caps the workspace's size (bytes; default contract.DefaultDisk, 10 GiB): the agent
	// measures it and refuses executions past it (ErrDiskCap).
	Disk    int64
	Runtime string // e.g. runsc (gVisor), when the engine has it
	// VolumeOpts are driver options for the session's volume, used when it is created: for
	// example {"type": "tmpfs", "device": "tmpfs", "o": "size=64m"} caps it at 64 MiB in memory.
	VolumeOpts map[string]string
	// StateVolumeOpts are driver options for the session's state volume (history, snapshots),
	// used when it is created; never the same storage as VolumeOpts' (the state is out of the
	// session user's reach only on storage of its own).
	StateVolumeOpts map[string]string
	// IdleStop records a policy on the session: `session gc` stops it after this long idle.
	IdleStop time.Duration
	// TTL records that the session is removed once idle this long (by `session gc`, and by
	// `runtimectl serve` on its own): sessions a caller forgot do not pile up.
	TTL time.Duration
	// TestRun marks a session made by a test process (see TestRunID): `session gc` removes it
	// once that process is gone, so a test binary killed mid-run leaves nothing for long.
	TestRun string
	// Owner records who made the session (see Settings.Owner); it is also the container's
	// io.runtimectl.owner label.
	Owner string
	// AllowHosts are the only destinations the session reaches, by name, through an egress
	// proxy of its own (`--allow-host`: exact names, *.suffix wildcards, literal addresses, an
	// optional :PORT; each entry may hold several, comma-separated). Empty: Network applies;
	// with them Network must be none (the default).
	AllowHosts []string
	// SecretHeaders are `--secret-header HOST=HEADER:SOURCE` specs: the proxy adds HEADER to
	// requests to HOST (an allowed host), with the value of the controller's environment
	// variable SOURCE (or of the file SOURCE, when it holds a slash), read when the proxy is
	// made. The session's code, environment, snapshots and history never hold it.
	SecretHeaders []string
}

func (s Spec) settings() (Settings, error) {
	if err := ValidateName(s.Name); err != nil {
		return Settings{}, err
	}
	if s.Lang == "" {
		s.Lang = "python"
	}
	l, err := lang.Get(s.Lang)
	if err != nil {
		return Settings{}, fmt.Errorf("%w %v", ErrInvalid, err)
	}
	if s.Image == "" {
		s.Image = l.Ref()
	}
	switch s.Network {
	case "":
		s.Network = engine.DefaultNetwork
	case "none", "bridge":
	default:
		return Settings{}, fmt.Errorf("%w network %q: use none or bridge", ErrInvalid, s.Network)
	}
	policy, err := contract.ParseSnapshotPolicy(s.Snapshot)
	if err != nil {
		return Settings{}, fmt.Errorf("%w %v", ErrInvalid, err)
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return Settings{}, fmt.Errorf("%w environment entry %q: use KEY=VALUE", ErrInvalid, kv)
		}
	}
	if s.Memory == 0 {
		s.Memory = engine.DefaultMemory
	}
	if s.Memory < 64<<20 {
		return Settings{}, fmt.Errorf("%w memory %d bytes: give at least 64m", ErrInvalid, s.Memory)
	}
	if s.Pids == 0 {
		s.Pids = engine.DefaultPids
	}
	if s.CPUs == 0 {
		s.CPUs = engine.DefaultCPUs
	}
	if s.CPUs < 0 || s.Pids < 0 {
		return Settings{}, advice.Errorf("%w limits: %s and %s must be positive", ErrInvalid, flag("CPUs", "--cpus"), flag("Pids", "--pids"))
	}
	if s.KeepSnapshots < 0 {
		return Settings{}, fmt.Errorf("%w snapshots to keep %d: give 1 or more (0 keeps the default, %d)", ErrInvalid, s.KeepSnapshots, snapshot.DefaultKeep)
	}
	if s.Disk == 0 {
		s.Disk = contract.DefaultDisk
	}
	if s.Disk < 64<<20 {
		return Settings{}, fmt.Errorf("%w disk cap %d bytes: give at least 64m (default 10g)", ErrInvalid, s.Disk)
	}
	if s.MaxOutput < 0 {
		return Settings{}, fmt.Errorf("%w output cap %d: give a positive size (0 keeps the default)", ErrInvalid, s.MaxOutput)
	}
	idle := ""
	if s.IdleStop > 0 {
		idle = s.IdleStop.String()
	}
	if s.TTL < 0 || s.IdleStop < 0 {
		return Settings{}, advice.Errorf("%w idle policy: %s and %s must be positive durations", ErrInvalid, flag("TTL", "--ttl"), flag("IdleStop", "--idle-stop"))
	}
	ttl := ""
	if s.TTL > 0 {
		ttl = s.TTL.String()
	}
	allow, secrets, err := egressSettings(s)
	if err != nil {
		return Settings{}, err
	}
	return Settings{
		AllowHosts: allow, SecretHeaders: secrets,
		IdleStop: idle, TTL: ttl, TestRun: s.TestRun, Owner: s.Owner,
		Schema: SettingsSchema, Session: s.Name, Lang: s.Lang, Image: s.Image, Memory: s.Memory, CPUs: s.CPUs,
		Pids: s.Pids, Network: s.Network, Env: s.Env, Snapshot: policy, KeepSnapshots: s.KeepSnapshots,
		MaxOutput: s.MaxOutput, Disk: s.Disk, Runtime: s.Runtime, Created: time.Now().UTC(),
	}, nil
}

func containerSpec(st Settings) engine.Spec {
	return engine.Spec{
		Session: st.Session, Lang: st.Lang, Image: st.Image, Volume: contract.VolumeName(st.Session), StateVolume: contract.StateVolumeName(st.Session),
		Memory: st.Memory, CPUs: st.CPUs, Pids: st.Pids, Network: st.Network, Env: st.Env,
		Settings: st.Encode(), Runtime: st.Runtime, Labels: egressLabel(st, ownerLabels(st.Owner)), Egress: len(st.AllowHosts) > 0,
	}
}

// StartInfo says what Start did.
type StartInfo struct {
	Created  bool   // a new session
	Pool     string // the warm pool a new session was taken from (see SetPool); "": none
	Started  bool   // the container was not running and was started (state restored)
	Recreate bool   // the container was missing and was made again from the volume's settings
}

// Start creates the session, or starts a stopped one again (its agent restores the latest
// snapshot), or does nothing for a running one. It returns once the agent answers.
func (c *Client) Start(ctx context.Context, spec Spec) (*Session, StartInfo, error) {
	return c.start(ctx, spec, false)
}

// start is Start; with existing it refuses to create a session that has neither container nor
// volume (what Open needs), without asking the engine twice.
func (c *Client) start(ctx context.Context, spec Spec, existing bool) (*Session, StartInfo, error) {
	var info StartInfo
	if err := ValidateName(spec.Name); err != nil {
		return nil, info, err
	}
	if err := c.checkConflicts(ctx, spec); err != nil {
		return nil, info, err
	}
	ci, err := c.ctr.Inspect(ctx, spec.Name)
	if err != nil || !ci.Running || c.ctr.CreateStarts() {
		// A fork whose maker was killed midway is never started as if whole. A running
		// container on Docker is not one (a fork is started only once whole), so the start of
		// a running session reads no settings for it.
		if st, serr := c.RecordedSettings(ctx, spec.Name); serr == nil && st.ForkOf != "" {
			if incomplete, gone := c.forkIncomplete(ctx, spec.Name, st); incomplete {
				return nil, info, errIncompleteFork(spec.Name, st, gone)
			}
		}
	}
	if err == nil && !ci.Running && remake(ci) {
		// Made before sessions had a state volume, or made as a warm pool's member: made again
		// with a state volume and the session's own settings (createContainer).
		if err := c.ctr.Remove(ctx, spec.Name, true); err != nil {
			return nil, info, err
		}
		err = engine.ErrNotFound
	}
	switch {
	case err == nil:
		// The container exists: settings are the recorded ones.
	case errors.Is(err, engine.ErrNotFound):
		vol, verr := c.vol.Inspect(ctx, spec.Name)
		var st Settings
		switch {
		case verr == nil:
			st, err = decodeSettings(vol.Settings)
			if err != nil {
				return nil, info, advice.Errorf("session %q: its volume's settings are unreadable (%v); %s", spec.Name, err, adviseRemoveVolume(vol.Name))
			}
			info.Recreate = true
		case errors.Is(verr, engine.ErrNotFound) && existing:
			return nil, info, advice.Errorf("%w %q: %s", ErrNotFound, spec.Name, adviseStart(spec.Name))
		case errors.Is(verr, engine.ErrNotFound):
			st, err = spec.settings()
			if err != nil {
				return nil, info, err
			}
			if err := c.checkImage(ctx, st); err != nil {
				return nil, info, err
			}
			if s, pool := c.claim(ctx, spec, st); s != nil {
				info.Created, info.Pool = true, pool
				return s, info, nil
			}
			if err := c.createVolumes(ctx, st, engine.VolumeOptions{Driver: spec.VolumeOpts, StateDriver: spec.StateVolumeOpts}); err != nil {
				return nil, info, err
			}
			info.Created = true
		default:
			return nil, info, verr
		}
		if info.Recreate {
			if err := c.checkImage(ctx, st); err != nil {
				return nil, info, err
			}
		}
		var made bool
		if ci, made, err = c.createContainer(ctx, st); err != nil {
			if !errors.Is(err, engine.ErrBeingCreated) {
				c.undoCreate(ctx, info, spec.Name, false) // the volumes only: no container is ours
			}
			return nil, info, err
		}
		if !made {
			// Another process created the session at the same moment: it is theirs, and this
			// start only joins it (nothing of it is undone here).
			info.Created, info.Recreate = false, false
		}
	default:
		return nil, info, err
	}
	if err := c.startEgressOf(ctx, spec.Name, ci); err != nil {
		c.undoCreate(ctx, info, spec.Name, true)
		return nil, info, err
	}
	if !ci.Running {
		err := c.ctr.Start(ctx, spec.Name)
		if err != nil && !info.Created && errors.Is(err, engine.ErrNetworkGone) {
			// Its network was removed while it was stopped (`docker network prune` takes
			// runtimectl-bridge when no container runs on it): made again, on a new one.
			if err = c.ctr.Remove(ctx, spec.Name, true); err == nil {
				if ci, err = c.ensureContainer(ctx, spec.Name); err == nil {
					err = c.ctr.Start(ctx, spec.Name)
				}
			}
		}
		if err != nil {
			c.undoCreate(ctx, info, spec.Name, true)
			return nil, info, err
		}
		info.Started = !info.Created
	}
	s := &Session{c: c, name: spec.Name, lang: ci.Lang}
	if err := s.connect(ctx); err != nil {
		// A new session whose agent never answered (--pids 1, say) leaves nothing behind.
		c.undoCreate(ctx, info, spec.Name, true)
		return nil, info, err
	}
	if info.Started || info.Recreate {
		s.unreported = s.hello.Restore
	}
	return s, info, nil
}

// undoCreate removes what Start made for a new session that could not be started (an unknown
// --runtime, say), so that a corrected `session start` begins afresh: the container when this
// Start made it (container), and the volumes, which the engine keeps while another process's
// container uses them.
func (c *Client) undoCreate(ctx context.Context, info StartInfo, name string, container bool) {
	if !info.Created {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
	defer cancel()
	if container {
		_ = c.ctr.Remove(ctx, name, true)
		_ = c.removeEgress(ctx, name)
	}
	_ = c.vol.RemoveSession(ctx, name)
}

func (c *Client) checkImage(ctx context.Context, st Settings) error {
	ic, ok := c.eng.(engine.ImageChecker)
	if !ok {
		return nil // the cluster pulls it: an image it cannot pull fails the start, saying so
	}
	err := ic.CheckImage(ctx, st.Image)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrNotFound):
		if l, lerr := lang.Get(st.Lang); lerr == nil && st.Image == l.Ref() {
			return advice.Errorf("%w: no image %s; %s", ErrNoImage, st.Image, advice.Words{Lib: "build it first (docker.From(client).Images().Build)", CLI: "build it with `runtimectl image build " + st.Lang + "`"})
		}
		return advice.Errorf("%w: no image %s; build it first (%s)", ErrNoImage, st.Image, advice.Words{Lib: "docker.From(client).Images().Build makes runtimectl's own images", CLI: "see `runtimectl image build --help`"})
	case errors.Is(err, engine.ErrNoAgent):
		// A wrong --image is bad input (the CLI's exit 2) as well as no usable image.
		return advice.Errorf("%w: %w: image %s does not carry the runtimectl agent; %s (or a Dockerfile FROM runtimectl/%s)", ErrInvalid, ErrNoImage, st.Image, advice.Words{Lib: "build one with Client.Images()", CLI: "use `runtimectl image build`"}, st.Lang)
	}
	return err
}

// Open returns a handle on an existing session, starting its container when it is stopped or
// was removed (the agent restores the latest snapshot), as exec needs.
func (c *Client) Open(ctx context.Context, name string) (*Session, StartInfo, error) {
	if err := ValidateName(name); err != nil {
		return nil, StartInfo{}, err
	}
	return c.start(ctx, Spec{Name: name}, true)
}

// exists returns ErrNotFound unless the session has a container or a volume.
func (c *Client) exists(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := c.ctr.Inspect(ctx, name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, engine.ErrNotFound) {
		return err
	}
	if _, verr := c.vol.Inspect(ctx, name); verr == nil {
		return nil
	} else if !errors.Is(verr, engine.ErrNotFound) {
		return verr
	}
	return advice.Errorf("%w %q: %s", ErrNotFound, name, adviseStart(name))
}

// Stop waits for the pending snapshot (taking one when the latest state is not saved), then
// stops the container. The volume and everything on it stays.
func (c *Client) Stop(ctx context.Context, name string) error {
	if err := c.exists(ctx, name); err != nil {
		return err
	}
	ci, err := c.ctr.Inspect(ctx, name)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return nil // only the volume is left: stopped already
		}
		return err
	}
	if ci.Running {
		s := &Session{c: c, name: name, lang: ci.Lang}
		if err := s.connect(ctx); err == nil {
			_ = s.conn.Call(ctx, drainRequest, nil)
			s.Close()
		}
	}
	if err := c.ctr.Stop(ctx, name, 10*time.Second); err != nil {
		return err
	}
	return c.stopEgress(ctx, name)
}

// Remove removes the session's container and both its volumes. A running session is refused unless
// force.
func (c *Client) Remove(ctx context.Context, name string, force bool) error {
	if err := c.exists(ctx, name); err != nil {
		return err
	}
	ci, err := c.ctr.Inspect(ctx, name)
	if err == nil && ci.Running && !force {
		return advice.Errorf("%w: %q; %s", ErrRunning, name, adviseStopOrForce(name))
	}
	if err := c.ctr.Remove(ctx, name, true); err != nil {
		return err
	}
	if err := c.removeHelpers(ctx, name); err != nil {
		return err
	}
	if err := c.removeEgress(ctx, name); err != nil {
		return err
	}
	return c.vol.RemoveSession(ctx, name)
}

// ensureContainer returns the session's container, creating it (not starting it) from the
// volume's settings when it was removed, so that files on the volume can be read. A stopped
// container made before sessions had a state volume is made again with one.
func (c *Client) ensureContainer(ctx context.Context, name string) (engine.Info, error) {
	if err := c.exists(ctx, name); err != nil {
		return engine.Info{}, err
	}
	ci, err := c.ctr.Inspect(ctx, name)
	if err == nil && !ci.Running && remake(ci) {
		if err := c.ctr.Remove(ctx, name, true); err != nil {
			return engine.Info{}, err
		}
		err = engine.ErrNotFound
	}
	if err == nil || !errors.Is(err, engine.ErrNotFound) {
		return ci, err
	}
	vol, err := c.vol.Inspect(ctx, name)
	if err != nil {
		return engine.Info{}, err
	}
	st, err := decodeSettings(vol.Settings)
	if err != nil {
		return engine.Info{}, err
	}
	ci, _, err = c.createContainer(ctx, st)
	return ci, err
}
