// Command benchrun runs runtimectl's benchmarks side by side with their baselines, prints a
// table and writes the results as JSON. `make bench` runs it; see bench/README.md.
//
//	go run ./bench/cmd/benchrun -out bench/results.json
//	go run ./bench/cmd/benchrun -only exec,cli -scale 0.3 -out /tmp/r.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runtimectl/runtimectl/bench"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

var phases = []string{"exec", "python", "exprs", "cli", "cold", "tcsession", "snapshot-array", "snapshot-df", "snapshot-array-cpus2", "snapshot-df-cpus2", "neighbours", "restore", "stdout", "memory", "many", "pool", "bash", "ipython", "density", "throughput", "kube"}

func main() {
	out := flag.String("out", "bench/results.json", "write the results here")
	only := flag.String("only", "", "comma-separated phases to run (default all): "+strings.Join(phases, ","))
	scale := flag.Float64("scale", 1, "multiply every sample count by this")
	many := flag.Int("many", 50, "sessions started at once in the last phase")
	density := flag.String("density", "10,50,100", "the density phase's levels: idle sessions held at once")
	tput := flag.Int("throughput", 20, "sessions executing at once in the throughput phase")
	rt := flag.String("runtimectl", "bin/runtimectl", "the built runtimectl binary")
	kubeconfig := flag.String("kubeconfig", "", "the kube phase's cluster (default $KUBECONFIG); the phase runs only with -only kube, or in a full run when a kubeconfig is given")
	flag.Parse()
	var levels []int
	for _, f := range strings.Split(*density, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			levels = append(levels, n)
		}
	}
	os.Exit(run(*out, *only, *scale, *many, *rt, *kubeconfig, levels, *tput))
}

func run(out, only string, scale float64, many int, rt, kubeconfig string, levels []int, tput int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()

	want := map[string]bool{}
	for _, p := range strings.Split(only, ",") {
		if p = strings.TrimSpace(p); p != "" {
			want[p] = true
		}
	}
	for p := range want {
		if !contains(phases, p) {
			fmt.Fprintf(os.Stderr, "benchrun: unknown phase %q; choose from %s\n", p, strings.Join(phases, ","))
			return 2
		}
	}

	runID := bench.NewRunID()
	d, err := bench.DialDocker(runID)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 1
	}
	defer d.Close()
	de, err := docker.New("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 1
	}
	c := session.NewWithEngine(de)
	defer c.Close()
	if !d.ImageExists(ctx, bench.PythonImage) {
		fmt.Fprintf(os.Stderr, "benchrun: no image %s; run `make images` first\n", bench.PythonImage)
		return 1
	}

	res := bench.NewResults(bench.DescribeMachine(ctx, d))
	r := bench.NewRunner(c, d, res, runID, rt, scale, os.Stderr)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		r.Cleanup(cctx)
	}()
	r.Sweep(ctx, 30*time.Minute)

	steps := map[string]func(context.Context) error{
		"exec":                 r.ExecRoundTrip,
		"exprs":                r.Exprs,
		"python":               r.PythonClient,
		"cli":                  r.CLIExec,
		"cold":                 r.ColdStart,
		"snapshot-array":       func(ctx context.Context) error { return r.Snapshots(ctx, bench.StateArray, 0) },
		"snapshot-df":          func(ctx context.Context) error { return r.Snapshots(ctx, bench.StateFrame, 0) },
		"snapshot-array-cpus2": func(ctx context.Context) error { return r.Snapshots(ctx, bench.StateArray, 2) },
		"snapshot-df-cpus2":    func(ctx context.Context) error { return r.Snapshots(ctx, bench.StateFrame, 2) },
		"neighbours":           r.Neighbours,
		"restore":              r.Restore,
		"stdout":               r.Stdout,
		"memory":               r.Memory,
		"many":                 func(ctx context.Context) error { return r.Many(ctx, many) },
		"tcsession":            r.TCSession,
		"bash":                 r.BashRoundTrip,
		"ipython":              r.IPython,
		"pool":                 func(ctx context.Context) error { return r.Pool(ctx, many) },
		"kube":                 func(ctx context.Context) error { return r.Kube(ctx, kubeconfig) },
		"density":              func(ctx context.Context) error { return r.Density(ctx, levels) },
		"throughput":           func(ctx context.Context) error { return r.Throughput(ctx, tput) },
	}
	failed := 0
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	for _, p := range phases {
		if len(want) > 0 && !want[p] {
			continue
		}
		if p == "kube" && len(want) == 0 && kubeconfig == "" {
			res.Note("phase kube not run: no kubeconfig (sudo make kube-up, then KUBECONFIG=... make bench)")
			continue
		}
		t := time.Now()
		fmt.Fprintf(os.Stderr, "benchrun: %s...\n", p)
		err := steps[p](ctx)
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(os.Stderr, "benchrun: interrupted; cleaning up")
			return 130
		}
		if err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "benchrun: %s failed: %v\n", p, err)
			res.Note("phase %s failed: %v", p, err)
		}
		fmt.Fprintf(os.Stderr, "benchrun: %s took %.1fs\n", p, time.Since(t).Seconds())
		// Each phase removes what it made before the next starts, so that one's sessions do
		// not weigh on the next.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r.Cleanup(cctx)
		cancel()
	}
	res.Header.DurationS = float64(time.Since(started).Milliseconds()) / 1000
	res.PrintTable(os.Stdout)
	if err := res.WriteJSON(out); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "benchrun: wrote %s in %.0fs\n", out, res.Header.DurationS)
	if failed > 0 {
		return 1
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
