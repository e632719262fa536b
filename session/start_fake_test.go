package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/lang"
)

// Every branch of Client.start on the fake engine: what the library asked of the engine, what
// StartInfo says, and what is left in the world.
func TestStartBranchesOnAFakeEngine(t *testing.T) {
	errBoom := errors.New("boom")
	type world struct {
		f    *fakeEngine
		name string
	}
	tests := []struct {
		name     string
		setup    func(w world)
		existing bool // Open rather than Start
		wantErr  error
		wantMsg  string
		want     StartInfo
		// calls are the engine's calls of these kinds, in order.
		kinds     []string
		calls     []string
		runtime   bool // the session has a runtime afterwards
		volumes   bool // and volumes
		connected bool
	}{
		{
			name:  "a new session: volumes, then a runtime, started, then the agent",
			kinds: []string{"volume-create", "create", "start", "dial"}, calls: []string{"volume-create s", "create s", "start s", "dial s"},
			want: StartInfo{Created: true}, runtime: true, volumes: true, connected: true,
		},
		{
			name:  "a running session: only the agent is dialled",
			setup: func(w world) { w.f.addSession(settingsOf(t, w.name), engine.StateRunning) },
			kinds: []string{"volume-create", "create", "start", "dial"}, calls: []string{"dial s"},
			want: StartInfo{}, runtime: true, volumes: true, connected: true,
		},
		{
			name:  "a stopped session is started again",
			setup: func(w world) { w.f.addSession(settingsOf(t, w.name), engine.StateExited) },
			kinds: []string{"volume-create", "create", "start"}, calls: []string{"start s"},
			want: StartInfo{Started: true}, runtime: true, volumes: true, connected: true,
		},
		{
			name:  "a session whose runtime was removed is made again from its volume's settings",
			setup: func(w world) { w.f.addSession(settingsOf(t, w.name), "") },
			kinds: []string{"check-image", "volume-create", "create", "start"}, calls: []string{"check-image runtimectl/bash:" + lang.ImageTag(), "create s", "start s"},
			want: StartInfo{Recreate: true, Started: true}, runtime: true, volumes: true, connected: true,
		},
		{
			name: "a stopped runtime made before the state volume is removed and made again with one",
			setup: func(w world) {
				w.f.addSession(settingsOf(t, w.name), engine.StateExited)
				w.f.ctrs[w.name].info.StateMounted = false
			},
			kinds: []string{"remove", "create", "start"}, calls: []string{"remove s", "create s", "start s"},
			want: StartInfo{Recreate: true, Started: true}, runtime: true, volumes: true, connected: true,
		},
		{
			name: "a volume whose settings cannot be read is reported, naming the volume",
			setup: func(w world) {
				w.f.vols[w.name] = engine.Volume{Name: contract.VolumeName(w.name), Session: w.name, Settings: "{not json"}
			},
			kinds: []string{"create", "start"}, wantMsg: "its volume's settings are unreadable", volumes: true,
		},
		{
			name: "Open of a session that does not exist makes nothing", existing: true,
			kinds: []string{"volume-create", "create"}, wantErr: ErrNotFound,
		},
		{
			name: "a missing image stops a new session before anything is made",
			setup: func(w world) {
				w.f.checkImage = func(context.Context, string) error { return fmt.Errorf("%w: no such image", engine.ErrNotFound) }
			},
			kinds: []string{"volume-create", "create"}, wantErr: ErrNoImage,
		},
		{
			name: "another process made the runtime at the same moment: this start joins it",
			setup: func(w world) {
				w.f.createIfAbsent = func(_ context.Context, spec engine.Spec) (engine.Info, bool, error) {
					w.f.defaultCreate(spec)
					in, _, err := w.f.defaultCreate(spec)
					return in, false, err
				}
			},
			kinds: []string{"volume-create", "create", "start"}, calls: []string{"volume-create s", "create s", "start s"},
			want: StartInfo{Started: true}, runtime: true, volumes: true, connected: true,
		},
		{
			name: "a runtime another process is creating is its to make: nothing is undone",
			setup: func(w world) {
				w.f.createIfAbsent = func(context.Context, engine.Spec) (engine.Info, bool, error) {
					return engine.Info{}, false, fmt.Errorf("create: %w", engine.ErrBeingCreated)
				}
			},
			kinds: []string{"volume-remove-session"}, wantErr: engine.ErrBeingCreated, volumes: true,
			want: StartInfo{Created: true},
		},
		{
			name: "a runtime that cannot be made undoes the new session's volumes",
			setup: func(w world) {
				w.f.createIfAbsent = func(context.Context, engine.Spec) (engine.Info, bool, error) { return engine.Info{}, false, errBoom }
			},
			kinds: []string{"volume-remove-session", "remove"}, calls: []string{"volume-remove-session s"}, wantErr: errBoom,
			want: StartInfo{Created: true},
		},
		{
			name: "a new runtime that cannot start is removed with its volumes",
			setup: func(w world) {
				w.f.start = func(context.Context, string) error { return errBoom }
			},
			kinds: []string{"remove", "volume-remove-session"}, calls: []string{"remove s", "volume-remove-session s"}, wantErr: errBoom,
			want: StartInfo{Created: true},
		},
		{
			name: "a stopped session that cannot start keeps all it has",
			setup: func(w world) {
				w.f.addSession(settingsOf(t, w.name), engine.StateExited)
				w.f.start = func(context.Context, string) error { return errBoom }
			},
			kinds: []string{"remove", "volume-remove-session"}, wantErr: errBoom, runtime: true, volumes: true,
		},
		{
			name: "a stopped session whose network is gone is made again and started on a new one",
			setup: func(w world) {
				w.f.addSession(settingsOf(t, w.name), engine.StateExited)
				n := 0
				w.f.start = func(_ context.Context, name string) error {
					if n++; n == 1 {
						return fmt.Errorf("start: %w", engine.Also(errors.New("network runtimectl-bridge not found"), engine.ErrNetworkGone))
					}
					return w.f.defaultStart(name)
				}
			},
			kinds: []string{"remove", "create", "start"}, calls: []string{"start s", "remove s", "create s", "start s"},
			want: StartInfo{Started: true}, runtime: true, volumes: true, connected: true,
		},
		{
			name: "a new session whose network is gone is not made again: it fails and is undone",
			setup: func(w world) {
				w.f.start = func(context.Context, string) error {
					return engine.Also(errors.New("network gone"), engine.ErrNetworkGone)
				}
			},
			kinds: []string{"remove", "create", "start"}, calls: []string{"create s", "start s", "remove s"}, wantErr: engine.ErrNetworkGone,
			want: StartInfo{Created: true},
		},
		{
			name: "a new session whose agent never answers leaves nothing behind",
			setup: func(w world) {
				w.f.dial = func(context.Context, string) (io.ReadWriteCloser, error) { return nil, errBoom }
			},
			kinds: []string{"remove", "volume-remove-session"}, calls: []string{"remove s", "volume-remove-session s"}, wantErr: errBoom,
			want: StartInfo{Created: true},
		},
		{
			name: "an unreachable engine is said as it is",
			setup: func(w world) {
				w.f.checkImage = func(context.Context, string) error { return fmt.Errorf("%w: at fake://", engine.ErrUnreachable) }
			},
			wantErr: engine.ErrUnreachable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			w := world{f: f, name: "s"}
			if tc.setup != nil {
				tc.setup(w)
			}
			c := f.client()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, info, err := c.start(ctx, Spec{Name: "s", Lang: "bash"}, tc.existing)
			switch {
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
			case tc.wantMsg != "":
				require.ErrorContains(t, err, tc.wantMsg)
			default:
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, info)
			if tc.calls != nil || tc.kinds != nil {
				assert.Equal(t, tc.calls, f.called(tc.kinds...), "the engine's calls")
			}
			_, rerr := c.ctr.Inspect(ctx, "s")
			assert.Equal(t, tc.runtime, rerr == nil, "a runtime is left")
			_, verr := c.vol.Inspect(ctx, "s")
			assert.Equal(t, tc.volumes, verr == nil, "volumes are left")
			if tc.connected {
				require.NotNil(t, s)
				assert.NotNil(t, s.live(), "the session's stream is open")
				s.Close()
			}
		})
	}
}

// On an engine whose pods start when they are made and whose stop removes them (Kubernetes),
// a stopped session (volumes, no runtime) is made again and the start does not start it twice.
func TestStartOnAnEngineWhoseStopRemovesTheRuntime(t *testing.T) {
	f := newFakeEngine(t)
	f.createStarts, f.stopRemoves, f.noImages = true, true, true
	c := f.client()
	ctx := context.Background()
	s, info, err := c.Start(ctx, Spec{Name: "k", Lang: "bash"})
	require.NoError(t, err)
	s.Close()
	assert.Equal(t, StartInfo{Created: true}, info)
	assert.Empty(t, f.called("start", "check-image"), "a pod runs once made; the cluster pulls its image")

	require.NoError(t, c.Stop(ctx, "k"))
	_, err = c.ctr.Inspect(ctx, "k")
	require.ErrorIs(t, err, engine.ErrNotFound, "stop removed the pod")
	f.reset()
	s, info, err = c.Start(ctx, Spec{Name: "k"})
	require.NoError(t, err)
	s.Close()
	assert.Equal(t, StartInfo{Recreate: true}, info)
	assert.Equal(t, []string{"create k"}, f.called("create", "start", "volume-create"))
}

// Info says what List says of one session: "stopped" where a stop removes the runtime (the bug
// the server had: a stopped Kubernetes session read "removed" over HTTP), "removed" where the
// runtime was removed, the runtime's state otherwise.
func TestInfoOfOneSessionIsItsListLine(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stopRemoves bool
		state       engine.State
		want        State
		running     bool
	}{
		{name: "running", state: engine.StateRunning, want: "running", running: true},
		{name: "stopped on Docker", state: engine.StateExited, want: "exited"},
		{name: "removed on Docker", want: "removed"},
		{name: "stopped on Kubernetes", stopRemoves: true, want: "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			f.stopRemoves = tc.stopRemoves
			f.addSession(settingsOf(t, "s"), tc.state)
			c := f.client()
			in, running, err := c.Info(context.Background(), "s")
			require.NoError(t, err)
			assert.Equal(t, tc.want, in.State)
			assert.Equal(t, tc.running, running)
			list, err := c.List(context.Background())
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, list[0].State, in.State, "Info and List agree")
			assert.Equal(t, "bash", in.Lang)
		})
	}
	_, _, err := newFakeEngine(t).client().Info(context.Background(), "none")
	require.ErrorIs(t, err, ErrNotFound)
}
