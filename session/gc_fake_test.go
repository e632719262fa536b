package session

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
)

// Every branch of GC (idle stops, orphans, ttl and ended test runs) on the fake engine.
func TestGCBranchesOnAFakeEngine(t *testing.T) {
	old := time.Now().Add(-3 * time.Hour)
	host, _ := os.Hostname()
	tests := []struct {
		name  string
		setup func(f *fakeEngine)
		opts  GCOptions
		// want is what gc says it did: session, action, done.
		want []GCAction
		// gone and left are sessions whose runtime is gone or still there afterwards.
		gone, left []string
		// noVolume are sessions whose volumes are gone afterwards.
		noVolume []string
	}{
		{
			name: "a running session idle past its --idle-stop is stopped",
			setup: func(f *fakeEngine) {
				st := settingsOf(t, "idle")
				st.IdleStop = "1h"
				f.addSession(st, engine.StateRunning)
				f.status["idle"] = execproto.Status{LastExec: old.Format(time.RFC3339Nano)}
			},
			want: []GCAction{{Session: "idle", Action: "stop", Done: true}},
			left: []string{"idle"},
		},
		{
			name: "a session that ran code lately is left running",
			setup: func(f *fakeEngine) {
				st := settingsOf(t, "busy")
				st.IdleStop = "1h"
				f.addSession(st, engine.StateRunning)
				f.status["busy"] = execproto.Status{LastExec: time.Now().Format(time.RFC3339Nano)}
			},
			left: []string{"busy"},
		},
		{
			name: "a session running code is not idle, whatever its last end",
			setup: func(f *fakeEngine) {
				f.addSession(settingsOf(t, "running"), engine.StateRunning)
				f.status["running"] = execproto.Status{Running: 3, LastExec: old.Format(time.RFC3339Nano)}
			},
			opts: GCOptions{Idle: time.Minute},
			left: []string{"running"},
		},
		{
			name: "dry run says what it would do and does nothing",
			setup: func(f *fakeEngine) {
				f.addSession(settingsOf(t, "idle"), engine.StateRunning)
				f.status["idle"] = execproto.Status{LastExec: old.Format(time.RFC3339Nano)}
			},
			opts: GCOptions{Idle: time.Hour, DryRun: true},
			want: []GCAction{{Session: "idle", Action: "stop"}},
			left: []string{"idle"},
		},
		{
			name: "a stopped container whose volume is gone is removed (orphans)",
			setup: func(f *fakeEngine) {
				f.addSession(settingsOf(t, "orphan"), engine.StateExited)
				delete(f.vols, "orphan")
			},
			opts: GCOptions{Orphans: true},
			want: []GCAction{{Session: "orphan", Action: "remove container", Done: true}},
			gone: []string{"orphan"},
		},
		{
			name: "a running container whose volume is gone is reported, not removed",
			setup: func(f *fakeEngine) {
				f.addSession(settingsOf(t, "orphan"), engine.StateRunning)
				delete(f.vols, "orphan")
			},
			opts: GCOptions{Orphans: true},
			want: []GCAction{{Session: "orphan", Action: "report"}},
			left: []string{"orphan"},
		},
		{
			name:  "a dead container is removed; its volume stays",
			setup: func(f *fakeEngine) { f.addSession(settingsOf(t, "dead"), engine.StateDead) },
			opts:  GCOptions{Orphans: true},
			want:  []GCAction{{Session: "dead", Action: "remove container", Done: true}},
			gone:  []string{"dead"},
		},
		{
			name: "a volume with unreadable settings and no container is reported",
			setup: func(f *fakeEngine) {
				f.vols["broken"] = engine.Volume{Name: "runtimectl-broken", Session: "broken", Settings: "{"}
			},
			opts: GCOptions{Orphans: true},
			want: []GCAction{{Session: "broken", Action: "report"}},
		},
		{
			name: "a stopped session past its --ttl is removed with its volumes",
			setup: func(f *fakeEngine) {
				st := settingsOf(t, "old")
				st.TTL, st.Created = "1h", old
				f.addSession(st, engine.StateExited)
			},
			want: []GCAction{{Session: "old", Action: "remove", Done: true}},
			gone: []string{"old"}, noVolume: []string{"old"},
		},
		{
			name: "a running session past gc's --ttl is removed",
			setup: func(f *fakeEngine) {
				f.addSession(settingsOf(t, "old"), engine.StateRunning)
				f.status["old"] = execproto.Status{LastExec: old.Format(time.RFC3339Nano)}
			},
			opts: GCOptions{TTL: time.Hour},
			want: []GCAction{{Session: "old", Action: "remove", Done: true}},
			gone: []string{"old"}, noVolume: []string{"old"},
		},
		{
			name: "a session made by a test process that has ended is removed",
			setup: func(f *fakeEngine) {
				st := settingsOf(t, "test-left")
				st.TestRun = host + "/1/not-its-start-time"
				f.addSession(st, engine.StateRunning)
			},
			want: []GCAction{{Session: "test-left", Action: "remove", Done: true}},
			gone: []string{"test-left"}, noVolume: []string{"test-left"},
		},
		{
			name: "a session of this test process stays",
			setup: func(f *fakeEngine) {
				st := settingsOf(t, "mine")
				st.TestRun = TestRunID()
				f.addSession(st, engine.StateRunning)
			},
			left: []string{"mine"},
		},
		{
			name: "where stop removes the runtime, a stopped session's history is not read (that would start it)",
			setup: func(f *fakeEngine) {
				f.stopRemoves = true
				st := settingsOf(t, "stopped")
				st.TTL, st.Created = "1h", old
				f.addSession(st, "")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			tc.setup(f)
			c := f.client()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			acts, err := c.GC(ctx, tc.opts)
			require.NoError(t, err)
			var got []GCAction
			for _, a := range acts {
				got = append(got, GCAction{Session: a.Session, Action: a.Action, Done: a.Done})
			}
			assert.Equal(t, tc.want, got, "gc's actions: %+v", acts)
			for _, n := range tc.gone {
				_, err := c.ctr.Inspect(ctx, n)
				assert.ErrorIs(t, err, engine.ErrNotFound, "%s's runtime is removed", n)
			}
			for _, n := range tc.left {
				_, err := c.ctr.Inspect(ctx, n)
				assert.NoError(t, err, "%s's runtime stays", n)
			}
			for _, n := range tc.noVolume {
				_, err := c.vol.Inspect(ctx, n)
				assert.ErrorIs(t, err, engine.ErrNotFound, "%s's volumes are removed", n)
			}
			if tc.name == "a running session idle past its --idle-stop is stopped" {
				in, err := c.ctr.Inspect(ctx, "idle")
				require.NoError(t, err)
				assert.False(t, in.Running, "stopped")
				assert.Contains(t, f.called("agent idle"), "agent idle drain", "the agent is drained before the stop")
			}
		})
	}
}
