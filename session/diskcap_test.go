package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// The third attack's background writer: started by an execution in a session of its own
// (start_new_session), it took a 64 MiB session to 401 MiB in 30 s while executions were
// refused. Past the cap every process of the session user is killed: the writer stops within
// seconds, the workspace stops growing, the state is back, the history says why.
func TestABackgroundWriterIsStoppedPastTheDiskCap(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Disk: 64 << 20})
	name := s.Name()
	require.Equal(t, "ok", string(run(t, s, "kept = 41").Status))
	r := run(t, s, `import subprocess
p = subprocess.Popen(["sh", "-c", "while true; do head -c 1048576 /dev/zero >> /workspace/grow; sleep 0.08; done"], start_new_session=True)
p.pid`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	// size reads the file's size; a read that the disk stop itself ended (it kills every
	// process of the session user, a running execution included) is read again.
	size := func() int64 {
		for i := 0; ; i++ {
			r, err := s.Exec(context.Background(), "import os\nos.path.getsize('/workspace/grow') if os.path.exists('/workspace/grow') else 0", session.ExecOptions{IgnoreDiskCap: true})
			if err == nil && r.Status == "ok" && r.Result != nil {
				var n int64
				_, _ = fmtSscan(*r.Result, &n)
				return n
			}
			if i == 20 {
				require.NoError(t, err)
				require.Equal(t, "ok", string(r.Status), r.Stderr)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// The workspace as the agent measures it passes the cap (the file alone may stay just under
	// it: the workspace holds a little more, and on a loaded machine the stop comes soon).
	require.Eventually(t, func() bool {
		st, err := s.Status(context.Background())
		return err == nil && st.DiskUsed > 64<<20
	}, time.Minute, 500*time.Millisecond, "the writer passes the cap")
	time.Sleep(5 * time.Second)
	a := size()
	time.Sleep(5 * time.Second)
	b := size()
	assert.Equal(t, a, b, "the workspace stopped growing")
	assert.Less(t, b, int64(160<<20), "the writer was stopped soon after the cap (64 MiB)")
	r, err := s.Exec(context.Background(), `import os
[open('/proc/%s/cmdline' % p, 'rb').read() for p in os.listdir('/proc') if p.isdigit() and b'/workspace/grow' in open('/proc/%s/cmdline' % p, 'rb').read()]`, session.ExecOptions{IgnoreDiskCap: true})
	require.NoError(t, err)
	assert.Equal(t, "[]", *r.Result, "no writer left")
	_, err = s.Exec(context.Background(), "kept", session.ExecOptions{})
	require.ErrorIs(t, err, session.ErrDiskCap, "executions are refused past the cap")
	r, err = s.Exec(context.Background(), "import os; os.remove('/workspace/grow'); kept + 1", session.ExecOptions{IgnoreDiskCap: true})
	require.NoError(t, err)
	assert.Equal(t, "42", *r.Result, "the state came back")
	notes := ""
	for _, e := range historyOf(t, c, name) {
		notes += strings.Join(e.Notes, "\n")
	}
	assert.Contains(t, notes, "past the session's disk cap")
}

// 200,000 empty files take no blocks; entries are capped too (one per 4 KiB of the disk
// cap): past it executions are refused with a message that says so, and run again once they
// are removed.
func TestEntriesAreCappedAsWellAsBytes(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Disk: 64 << 20})
	r := execWith(t, s, "import os\nos.makedirs('many')\nfor i in range(20000):\n    os.symlink('x', 'many/l%d' % i) if i % 2 else open('many/f%d' % i, 'w').close()", session.ExecOptions{Timeout: 2 * time.Minute})
	require.Contains(t, []string{"ok", "crashed"}, string(r.Status), r.Stderr)
	var err error
	require.Eventually(t, func() bool {
		_, err = s.Exec(context.Background(), "1", session.ExecOptions{})
		return err != nil
	}, 30*time.Second, 200*time.Millisecond, "entries past the cap are refused")
	require.ErrorIs(t, err, session.ErrDiskCap)
	assert.Contains(t, err.Error(), "entries")
	r, err = s.Exec(context.Background(), "import shutil; shutil.rmtree('many')", session.ExecOptions{IgnoreDiskCap: true})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.Eventually(t, func() bool {
		_, err = s.Exec(context.Background(), "1", session.ExecOptions{})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "executions run again")
	if err != nil {
		t.Log(err)
	}
}

// The state volume is metered: executions that print a lot no longer grow history.jsonl
// without bound (the third attack: 100 × 4 MB made 105 MB while stats said 8 KiB): past
// 32 MiB the oldest are cut and the history says so; stats shows the state's size.
func TestTheHistoryIsCutPastItsCapAndSaysSo(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	ctx := testenv.Ctx(t, 5*time.Minute)
	for i := 0; i < 45; i++ {
		r, err := s.Exec(ctx, "import sys\nsys.stdout.write('o' * (600 << 10)); sys.stderr.write('e' * (600 << 10))", session.ExecOptions{})
		require.NoError(t, err)
		require.Equal(t, "ok", string(r.Status))
	}
	execs := historyOf(t, c, name)
	require.NotEmpty(t, execs)
	assert.Less(t, len(execs), 45, "the oldest were cut")
	assert.Equal(t, int64(45), execs[len(execs)-1].Seq, "the newest are kept")
	require.NotEmpty(t, execs[0].Notes)
	assert.Contains(t, execs[0].Notes[0], "the history before execution")
	var st session.Stats
	require.Eventually(t, func() bool {
		var err error
		st, err = c.Stats(ctx, name)
		require.NoError(t, err)
		return st.StateUsed > 1<<20
	}, 30*time.Second, time.Second, "stats shows the state's size")
	assert.Less(t, st.StateUsed, int64(40<<20), "history and snapshots stay bounded: %d", st.StateUsed)
}

func fmtSscan(s string, n *int64) (int, error) { return fmt.Sscan(s, n) }
