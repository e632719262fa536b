package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/snapshot"
)

// putSnapshot puts a snapshot (manifest and data) of seq in the state of session name's
// runtime, and returns its id.
func (f *fakeEngine) putSnapshot(t testing.TB, name string, seq int64, broken bool) string {
	id := snapshot.NewID(seq)
	content := []byte("x=1\n")
	m := snapshot.Manifest{Schema: snapshot.Schema, ID: id, Seq: seq, Created: time.Now(), Lang: "bash", Format: "bash-script",
		SizeBytes: int64(len(content)), Checksum: fmt.Sprintf("crc32c:%08x", crc32.Checksum(content, crc32.MakeTable(crc32.Castagnoli))),
		Kept: []string{"x"}, Skipped: []snapshot.Skipped{}}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	if broken {
		b = []byte("{not json")
	}
	manifest, data := contract.SnapshotFiles(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	files := f.ctrs[name].files
	files[contract.StatePath(manifest)] = b
	files[contract.StatePath(data)] = content
	return id
}

// Every branch of Fork on the fake engine.
func TestForkBranchesOnAFakeEngine(t *testing.T) {
	type snaps struct{ first, second, broken string }
	tests := []struct {
		name    string
		setup   func(f *fakeEngine) snaps
		at      func(s snaps) string
		dst     string
		wantErr error
		// wantSnap is the snapshot the fork holds ("" none), wantHistory its first record's seq.
		wantSnap    func(s snaps) string
		wantHistory int64
	}{
		{
			name: "a fork takes the latest good snapshot and starts its history there",
			setup: func(f *fakeEngine) snaps {
				return snaps{first: f.putSnapshot(t, "src", 1, false), second: f.putSnapshot(t, "src", 2, false), broken: f.putSnapshot(t, "src", 3, true)}
			},
			wantSnap: func(s snaps) string { return s.second }, wantHistory: 2,
		},
		{
			name: "a fork at a snapshot takes that one",
			setup: func(f *fakeEngine) snaps {
				return snaps{first: f.putSnapshot(t, "src", 1, false), second: f.putSnapshot(t, "src", 2, false)}
			},
			at:       func(s snaps) string { return s.first },
			wantSnap: func(s snaps) string { return s.first }, wantHistory: 1,
		},
		{
			name:  "a fork of a session with no snapshot has an empty state and history",
			setup: func(*fakeEngine) snaps { return snaps{} },
		},
		{
			name:    "a fork at a snapshot that does not exist is refused",
			setup:   func(*fakeEngine) snaps { return snaps{} },
			at:      func(snaps) string { return "9-abcdef" },
			wantErr: ErrInvalid,
		},
		{
			name:    "a fork at a broken snapshot is refused",
			setup:   func(f *fakeEngine) snaps { return snaps{broken: f.putSnapshot(t, "src", 1, true)} },
			at:      func(s snaps) string { return s.broken },
			wantErr: ErrInvalid,
		},
		{
			name:    "a fork onto a session that exists is refused",
			setup:   func(f *fakeEngine) snaps { f.addSession(settingsOf(t, "dst"), engine.StateExited); return snaps{} },
			wantErr: ErrInvalid,
		},
		{name: "a fork of a session that does not exist is refused", setup: func(f *fakeEngine) snaps {
			delete(f.ctrs, "src")
			delete(f.vols, "src")
			return snaps{}
		}, wantErr: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			f.addSession(settingsOf(t, "src"), engine.StateRunning)
			f.ctrs["src"].files[contract.Workspace+"/data.txt"] = []byte("data")
			s := tc.setup(f)
			c := f.client()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			at := ""
			if tc.at != nil {
				at = tc.at(s)
			}
			fs, err := c.Fork(ctx, "src", "dst", at)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			defer fs.Close()
			assert.Contains(t, f.called("agent src"), "agent src drain", "the source's pending snapshot is waited for")
			f.mu.Lock()
			files := f.ctrs["dst"].files
			f.mu.Unlock()
			assert.Equal(t, []byte("data"), files[contract.Workspace+"/data.txt"], "the workspace is copied")
			st, err := c.RecordedSettings(ctx, "dst")
			require.NoError(t, err)
			assert.Equal(t, "dst", st.Session)
			if tc.wantSnap == nil {
				assert.NotContains(t, files, contract.StatePath(contract.HistoryFile), "no history: nothing ran")
				return
			}
			id := tc.wantSnap(s)
			manifest, data := contract.SnapshotFiles(id)
			assert.Contains(t, files, contract.StatePath(manifest))
			assert.Contains(t, files, contract.StatePath(data))
			for p := range files {
				rel, inState := strings.CutPrefix(p, contract.StateDir+"/")
				if inState && p != contract.StatePath(manifest) && p != contract.StatePath(data) && rel != contract.HistoryFile &&
					rel != contract.SnapshotsDir && rel != contract.SnapdataDir && rel != contract.ForkDoneFile {
					t.Errorf("the fork holds %s of the source's state, which it should not", p)
				}
			}
			assert.Contains(t, files, contract.StatePath(contract.ForkDoneFile), "the fork is whole: its done file is written")
			execs, problems, err := history.Parse(bytes.NewReader(files[contract.StatePath(contract.HistoryFile)]))
			require.NoError(t, err)
			require.Empty(t, problems)
			require.Len(t, execs, 1)
			assert.Equal(t, tc.wantHistory, execs[0].Seq)
			assert.Contains(t, execs[0].Code, "forked from session src at snapshot "+id)
		})
	}
}
