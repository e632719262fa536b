package bench

import (
	"context"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// exprsSetup is the state of the expression workload: what an agent's session holds after
// loading some data (a DataFrame of 100k rows, a dict of 100k keys, a list, a counter).
const exprsSetup = `import numpy as np, pandas as pd
from collections import defaultdict, Counter
df = pd.DataFrame({"a": np.arange(100_000), "b": np.random.default_rng(0).random(100_000)})
d = {i: str(i) for i in range(100_000)}
counts = defaultdict(int)
lst = list(range(1000))
c = Counter("abracadabra")
x = 41`

// exprsWorkload is the mix of expression statements an agent sends to look at its data: some
// provably inert (a name, a literal), most not (a subscript, an attribute, a call, an
// operator), each of which now takes a snapshot after it.
var exprsWorkload = []string{
	"x", "df.shape", "counts['k']", "len(d)", "42", "lst[-1]", "df.a.sum()", "c.most_common(1)",
	"x + 1", "d[5]", "df", "type(lst)",
}

// Exprs measures the cost of the snapshot policy (every execution that ran code may have
// changed the state) on a workload of mixed expression statements: each one's round trip in a
// session with the default policy, against the same in a session with snapshots off. The
// difference is the fork of the interpreter that the next execution waits for.
func (r *Runner) Exprs(ctx context.Context) error {
	every, err := r.start(ctx, session.Spec{Name: r.sessionName("exprs")})
	if err != nil {
		return err
	}
	defer every.Close()
	off, err := r.start(ctx, session.Spec{Name: r.sessionName("exprs-off"), Snapshot: "manual"})
	if err != nil {
		return err
	}
	defer off.Close()
	for _, s := range []*session.Session{every, off} {
		if _, err := execOK(ctx, s, exprsSetup, session.ExecOptions{}); err != nil {
			return err
		}
	}
	rtt := func(s *session.Session, code string) (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, s, code, session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	for i := 0; i < 2; i++ { // warm up
		for _, code := range exprsWorkload {
			for _, s := range []*session.Session{every, off} {
				if _, err := rtt(s, code); err != nil {
					return err
				}
			}
		}
	}
	rounds := r.n(20, 2)
	for i := 0; i < rounds; i++ {
		for _, code := range exprsWorkload {
			v, err := rtt(every, code)
			if err != nil {
				return err
			}
			r.R.Add("exprs_rtt.runtimectl", Ms, "lower", "Session.Exec of a mix of expression statements (a name, a literal, subscripts, attributes, calls, operators) on a session holding a 100k-row DataFrame and a 100k-key dict, snapshot policy every (a snapshot after each one that ran code)", v)
			v, err = rtt(off, code)
			if err != nil {
				return err
			}
			r.R.Add("exprs_rtt.runtimectl_snapshots_off", Ms, "lower", "the same executions on a session started with Snapshot: manual", v)
		}
	}
	r.R.Compare("exprs_rtt.runtimectl", "exprs_rtt.runtimectl_snapshots_off", Target{})
	return nil
}
