package session_test

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// TestSoak is the durability test: docker kill at random moments (during executions, during
// the snapshot writes that follow them, between executions), then checks that the session comes
// back, the history parses, every execution whose result came back is recorded exactly once with
// that status, and the state is the one after the execution of the snapshot the agent restored,
// which is at least as recent as the newest snapshot listed as saved before the kill.
//
// RUNTIMECTL_SOAK=N sets the number of kills (`make soak` runs 200); the normal test run does 10.
// RUNTIMECTL_SOAK_SEED replays a run.
func TestSoak(t *testing.T) {
	iterations := 10
	if v := os.Getenv("RUNTIMECTL_SOAK"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "RUNTIMECTL_SOAK")
		iterations = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("RUNTIMECTL_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "RUNTIMECTL_SOAK_SEED")
		seed = n
	}
	t.Logf("soak: %d iterations, seed %d (RUNTIMECTL_SOAK_SEED replays it)", iterations, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	completed := map[int64]string{} // seq -> status, for every result that came back
	checked := map[int64]string{}   // seq of a check -> the state it showed
	begin := time.Now()
	var kills, duringExec, afterExec, idle int
	var restoredEmpty, restoredSaved int

	for i := 1; i <= iterations; i++ {
		mode := rng.IntN(3)
		code := fmt.Sprintf("v = %d\nblob = bytes(%d)\nn = len(blob)\nimport time\ntime.sleep(%.3f)", i, rng.IntN(8<<20), rng.Float64()*0.3)
		ctx := testenv.Ctx(t, 3*time.Minute)
		var saved int64 // the newest snapshot listed before the kill
		listSaved := func() {
			ms, err := c.Snapshots(ctx, name)
			require.NoError(t, err)
			for _, m := range ms {
				saved = max(saved, m.Seq)
			}
		}
		note := func(r *session.Result) {
			if r != nil && r.Seq > 0 {
				completed[r.Seq] = string(r.Status)
			}
		}
		switch mode {
		case 0: // during an execution (or just after it, when the code was quick)
			duringExec++
			done := make(chan *session.Result, 1)
			go func() {
				r, err := s.Exec(context.Background(), code, session.ExecOptions{})
				if err != nil {
					r = nil
				}
				done <- r
			}()
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
			listSaved()
			require.NoError(t, docker.From(c).Containers().Kill(ctx, name))
			select {
			case r := <-done:
				if r != nil && r.Status == "ok" {
					note(r)
				}
			case <-time.After(time.Minute):
				t.Fatalf("iteration %d: the execution did not return after docker kill", i)
			}
		case 1: // during the snapshot write that follows an execution
			afterExec++
			r := execWith(t, s, code, session.ExecOptions{})
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			note(r)
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			listSaved()
			require.NoError(t, docker.From(c).Containers().Kill(ctx, name))
		case 2: // between executions, once the snapshot is saved: nothing may be lost
			idle++
			r := execWith(t, s, code, session.ExecOptions{})
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			note(r)
			waitSaved(t, c, name, r.Seq)
			listSaved()
			require.Equal(t, r.Seq, saved)
			require.NoError(t, docker.From(c).Containers().Kill(ctx, name))
		}
		kills++
		for {
			ci, err := docker.From(c).Containers().Inspect(ctx, name)
			require.NoError(t, err)
			if !ci.Running {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.Close()

		// The session comes back from the newest good snapshot.
		var err error
		s, _, err = c.Start(ctx, session.Spec{Name: name})
		require.NoError(t, err, "iteration %d: the session did not come back", i)
		info := s.Restored()
		require.NotNil(t, info)
		require.GreaterOrEqual(t, info.Seq, saved, "iteration %d: a snapshot listed as saved before the kill was not used: %v", i, info.Messages)

		// The history parses; every completed execution is in it exactly once, as it ended.
		ends := rawEnds(t, c, name)
		execsList, problems, err := c.History(ctx, name)
		require.NoError(t, err)
		require.Empty(t, problems, "iteration %d", i)
		codes := map[int64]string{}
		for _, e := range execsList {
			codes[e.Seq] = e.Code
			require.NotEqual(t, "running", string(e.Status), "iteration %d: execution %d left running", i, e.Seq)
			require.Equal(t, 1, ends[e.Seq], "iteration %d: execution %d has %d end records", i, e.Seq, ends[e.Seq])
		}
		for seq, st := range completed {
			require.Contains(t, codes, seq, "iteration %d: completed execution %d is not in the history", i, seq)
			require.Equal(t, 1, ends[seq], "iteration %d: execution %d", i, seq)
			e := execBySeq(t, execsList, seq)
			require.Equal(t, st, string(e.Status), "iteration %d: execution %d", i, seq)
		}

		// The state is the one after the restored snapshot's execution: an assignment's values
		// when it is one (a snapshot follows only an execution that ran to its end), or what the
		// check that ran there showed (`(v, n)` ran code: a tuple's repr calls its items', so a
		// snapshot follows it too, holding the state the check ran on).
		want := "NameError"
		if info.Seq > 0 {
			if m := regexp.MustCompile(`^v = (\d+)\nblob = bytes\((\d+)\)`).FindStringSubmatch(codes[info.Seq]); m != nil {
				want = fmt.Sprintf("(%s, %s)", m[1], m[2])
			} else {
				shown, ok := checked[info.Seq]
				require.True(t, ok, "iteration %d: the restored snapshot follows execution %d: %q", i, info.Seq, codes[info.Seq])
				want = shown
			}
			restoredSaved++
		} else {
			restoredEmpty++
		}
		r := execWith(t, s, "(v, n)", session.ExecOptions{}) // changes nothing, though a snapshot follows it
		if want == "NameError" {
			require.Equal(t, "error", string(r.Status), "iteration %d", i)
			require.Equal(t, "NameError", r.Error.Name)
		} else {
			require.Equal(t, "ok", string(r.Status), "iteration %d: %s", i, r.Stderr)
			require.Equal(t, want, *r.Result, "iteration %d: state after execution %d expected", i, info.Seq)
		}
		checked[r.Seq] = want
		note(r)
	}
	elapsed := time.Since(begin)
	t.Logf("soak: %d kills (%d during an execution, %d during the snapshot after one, %d between executions) in %s, %.1f s per kill; %d restores from a snapshot, %d from the empty state; %d executions completed",
		kills, duringExec, afterExec, idle, elapsed.Round(time.Second), elapsed.Seconds()/float64(kills), restoredSaved, restoredEmpty, len(completed))
}

// rawEnds counts the end records of each execution in the session's history file.
func rawEnds(t *testing.T, c *session.Client, name string) map[int64]int {
	t.Helper()
	rc, err := docker.From(c).Containers().CopyFrom(testenv.Ctx(t, time.Minute), name, session.StateDir+"/history.jsonl")
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	_, err = tr.Next()
	require.NoError(t, err)
	ends := map[int64]int{}
	sc := bufio.NewScanner(tr)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r history.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "history line %q", sc.Text())
		if r.Kind == history.KindEnd {
			ends[r.Seq]++
		}
	}
	require.NoError(t, sc.Err())
	return ends
}
