package bench

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/snapshot"
)

// State is a namespace the snapshot figures are measured with.
type State struct {
	Key   string // in figure names
	N     int    // iterations in a default run
	What  string // for descriptions
	Setup string // Python code that builds it
}

// The two states of pairs 4 and 5.
var (
	StateArray = State{Key: "array_100mib", N: 8, What: "a 100 MiB float64 ndarray",
		Setup: "import numpy as np\na = np.random.default_rng(0).random(100 << 17)"}
	// The frame has mixed columns, as data loaded from a CSV does: 6 float64, 2 int64, one of
	// short strings (object dtype) and one of timestamps.
	StateFrame = State{Key: "df_1m_x10", N: 6, What: "a 1M x 10 DataFrame (6 float64, 2 int64, 1 string, 1 datetime column)",
		Setup: `import numpy as np, pandas as pd
_rng = np.random.default_rng(0)
_n = 1_000_000
df = pd.DataFrame({**{f"f{i}": _rng.random(_n) for i in range(6)},
                   **{f"i{i}": _rng.integers(0, 1 << 40, _n) for i in range(2)},
                   "s": pd.Series(_rng.integers(0, 100_000, _n)).map("id-{}".format),
                   "t": pd.date_range("2024-01-01", periods=_n, freq="s")})
del _rng, _n`}
)

// pickleToFile times pickle.dump(df, f, protocol=5) to a file on the volume with fsync, in the
// session's own interpreter; it evaluates to (bytes, seconds).
const pickleToFile = `import pickle as _p, time as _t, os as _o
_t0 = _t.perf_counter()
with open("/workspace/.bench-pickle", "wb") as _f:
    _p.dump(df, _f, protocol=5)
    _f.flush()
    _o.fsync(_f.fileno())
_dt = _t.perf_counter() - _t0
_sz = _o.path.getsize("/workspace/.bench-pickle")
_o.remove("/workspace/.bench-pickle")
(_sz, _dt)`

// pickleToMemory times pickle.dumps(df, protocol=5); it evaluates to (bytes, seconds).
const pickleToMemory = `import pickle as _p, time as _t
_t0 = _t.perf_counter()
_b = _p.dumps(df, protocol=5)
_dt = _t.perf_counter() - _t0
_sz = len(_b)
del _b
(_sz, _dt)`

// Snapshots is pairs 4 and 5 for one state. In a session with the default policy it runs
// `y = i`, whose snapshot forks the interpreter, then at once `x = 1`: that round trip, against
// the same two executions in a session with snapshots off, is the time an execution waits for
// a snapshot (pair 4). The time from the end of `y = i` to the commit of its snapshot (the
// manifest's created time) gives the background write throughput (pair 5), against dd writing
// as many bytes with fsync to the same volume, and for the DataFrame against pickle protocol 5
// in the session's own interpreter.
//
// cpus is the sessions' CPU limit, 0 for the default (1 CPU); figures measured at another
// limit carry it in their names (snapshot_wait.array_100mib_cpus2...), to compare with rounds
// measured before the default limit existed (no limit, on a 2-core machine).
func (r *Runner) Snapshots(ctx context.Context, st State, cpus float64) error {
	if cpus > 0 {
		st.Key = fmt.Sprintf("%s_cpus%g", st.Key, cpus)
		st.What += fmt.Sprintf(", sessions with --cpus %g", cpus)
	}
	every, err := r.start(ctx, session.Spec{Name: r.sessionName("snap-" + st.Key[:2]), CPUs: cpus})
	if err != nil {
		return err
	}
	defer every.Close()
	off, err := r.start(ctx, session.Spec{Name: r.sessionName("snap-off-" + st.Key[:2]), Snapshot: "manual", CPUs: cpus})
	if err != nil {
		return err
	}
	defer off.Close()
	for _, s := range []*session.Session{every, off} {
		if _, err := execOK(ctx, s, st.Setup, session.ExecOptions{}); err != nil {
			return err
		}
	}
	// Let the first snapshot of the state land.
	res, err := execOK(ctx, every, "y = 0", session.ExecOptions{})
	if err != nil {
		return err
	}
	if _, err := r.waitSnapshot(ctx, every.Name(), res.Seq); err != nil {
		return err
	}

	prefix := "snapshot_wait." + st.Key
	wprefix := "snapshot_write." + st.Key
	isFrame := strings.HasPrefix(st.Key, StateFrame.Key)
	for i, n := 1, r.n(st.N, 3); i <= n; i++ {
		// Pair 4, snapshots on.
		resY, err := execOK(ctx, every, fmt.Sprintf("y = %d", i), session.ExecOptions{})
		if err != nil {
			return err
		}
		endY := time.Now()
		t := time.Now()
		resX, err := execOK(ctx, every, "x = 1", session.ExecOptions{})
		if err != nil {
			return err
		}
		r.R.Add(prefix+".runtimectl", Ms, "lower", fmt.Sprintf("with %s in the namespace: round trip of Exec(`x = 1`) sent as soon as Exec(`y = i`) returned, whose snapshot forks the interpreter (policy every)", st.What), ms(time.Since(t)))
		if resY.State == nil || resY.State.Snapshot == "" {
			return fmt.Errorf("exec `y = %d` started no snapshot (state %+v)", i, resY.State)
		}
		m, err := r.waitSnapshotID(ctx, every.Name(), resY.State.Snapshot)
		if err != nil {
			return err
		}
		took := m.Created.Sub(endY)
		r.R.Add(wprefix+".runtimectl", MiBps, "higher", fmt.Sprintf("snapshot of %s written in the background: manifest size over the time from the end of the execution to the commit of the snapshot (data and manifest fsynced)", st.What), mibps(m.SizeBytes, took))
		r.R.Add(wprefix+".size", MiB, "lower", "informational: size of the snapshot data", float64(m.SizeBytes)/(1<<20))
		if _, err := r.waitSnapshot(ctx, every.Name(), resX.Seq); err != nil {
			return err
		}

		// Pair 4, snapshots off.
		if _, err := execOK(ctx, off, fmt.Sprintf("y = %d", i), session.ExecOptions{}); err != nil {
			return err
		}
		t = time.Now()
		if _, err := execOK(ctx, off, "x = 1", session.ExecOptions{}); err != nil {
			return err
		}
		r.R.Add(prefix+".snapshots_off", Ms, "lower", "the same two executions in a session started with Snapshot: manual", ms(time.Since(t)))

		// Pair 5 baselines.
		mib := (m.SizeBytes + 1<<20 - 1) >> 20
		d, err := r.ddFsync(ctx, every.Name(), mib)
		if err != nil {
			return err
		}
		r.R.Add(wprefix+".raw_fsync", MiBps, "higher", "`dd if=/dev/zero bs=1M conv=fsync` of as many MiB as the snapshot, to the session's volume, run in its container (dd's own timing)", mibps(mib<<20, d))
		if isFrame {
			sz, d, err := r.timedEval(ctx, off, pickleToFile)
			if err != nil {
				return err
			}
			r.R.Add(wprefix+".pickle5_in_process", MiBps, "higher", "pickle.dump(df, f, protocol=5) to a file on the volume and fsync, in the session's own interpreter (no fork)", mibps(sz, d))
			sz, d, err = r.timedEval(ctx, off, pickleToMemory)
			if err != nil {
				return err
			}
			r.R.Add(wprefix+".pickle5_to_memory", MiBps, "higher", "informational: pickle.dumps(df, protocol=5) in memory, in the session's interpreter", mibps(sz, d))
		}
	}
	r.R.Compare(prefix+".runtimectl", prefix+".snapshots_off", Target{"delta", "<=", 5})
	if isFrame {
		r.R.Compare(wprefix+".runtimectl", wprefix+".pickle5_in_process", Target{"ratio", ">=", 1})
		r.R.Compare(wprefix+".runtimectl", wprefix+".raw_fsync", Target{})
	} else {
		r.R.Compare(wprefix+".runtimectl", wprefix+".raw_fsync", Target{"ratio", ">=", 0.7})
	}
	return nil
}

func mibps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / (1 << 20) / d.Seconds()
}

// waitSnapshot waits until a snapshot that follows execution seq (or a later one) is saved.
func (r *Runner) waitSnapshot(ctx context.Context, name string, seq int64) (snapshot.Manifest, error) {
	return r.pollManifest(ctx, name, fmt.Sprintf("after execution %d", seq), func(m snapshot.Manifest) bool { return m.Seq >= seq })
}

// waitSnapshotID waits until the snapshot id is saved.
func (r *Runner) waitSnapshotID(ctx context.Context, name, id string) (snapshot.Manifest, error) {
	return r.pollManifest(ctx, name, id, func(m snapshot.Manifest) bool { return m.ID == id })
}

func (r *Runner) pollManifest(ctx context.Context, name, what string, ok func(snapshot.Manifest) bool) (snapshot.Manifest, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ms, err := r.C.Snapshots(ctx, name)
		if err != nil {
			return snapshot.Manifest{}, err
		}
		for _, m := range ms {
			if ok(m) {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			return snapshot.Manifest{}, fmt.Errorf("session %s: no snapshot %s after 3 minutes", name, what)
		}
		select {
		case <-ctx.Done():
			return snapshot.Manifest{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var ddRE = regexp.MustCompile(`copied, ([0-9.]+) s`)

// ddFsync writes mib MiB with fsync to the session's volume, in its container, and returns
// dd's own timing.
func (r *Runner) ddFsync(ctx context.Context, name string, mib int64) (time.Duration, error) {
	script := fmt.Sprintf("dd if=/dev/zero of=/workspace/.bench-dd bs=1M count=%d conv=fsync 2>&1; rm -f /workspace/.bench-dd", mib)
	es, err := r.D.Exec(ctx, containerOf(name), []string{"sh", "-c", script}, "1000:1000", false)
	if err != nil {
		return 0, err
	}
	defer es.Close()
	out, err := io.ReadAll(es)
	if err != nil {
		return 0, err
	}
	m := ddRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("dd said %q %q", out, es.Stderr.String())
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return time.Duration(f * float64(time.Second)), nil
}

// timedEval runs code that evaluates to (bytes, seconds).
func (r *Runner) timedEval(ctx context.Context, s *session.Session, code string) (int64, time.Duration, error) {
	res, err := execOK(ctx, s, code, session.ExecOptions{})
	if err != nil {
		return 0, 0, err
	}
	if res.Result == nil {
		return 0, 0, fmt.Errorf("no result from %q", short(code))
	}
	var n int64
	var f float64
	if _, err := fmt.Sscanf(strings.TrimSpace(*res.Result), "(%d, %g)", &n, &f); err != nil {
		return 0, 0, fmt.Errorf("result %q: %v", *res.Result, err)
	}
	return n, time.Duration(f * float64(time.Second)), nil
}
