// Command abbench compares two builds of the session images in one interleaved run: one session
// of each, the same code executed on A then B (then B then A) round after round, so that the
// load of a shared machine falls on both alike. It prints the p50 and p90 of each side and the
// ratio B/A of the p50s.
//
//	go run ./bench/cmd/abbench -lang bash -a runtimectl/bash:old -b runtimectl/bash:new -code 'x=1' -n 300
//	go run ./bench/cmd/abbench -a runtimectl/python:old -b runtimectl/python:new -stdout 100   # MiB/s of 100 MiB streamed
//	go run ./bench/cmd/abbench -a runtimectl/python:old -b runtimectl/python:new -cold 20      # Start to the result of the code, s
//	go run ./bench/cmd/abbench -a runtimectl/python:old -b runtimectl/python:new -idle 4       # idle memory after -setup, MiB
//
// -env-a / -env-b give one side's sessions an environment (RUNTIMECTL_IPYTHON=0: the same image
// without IPython).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/runtimectl/runtimectl/bench"
	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

func main() {
	lang := flag.String("lang", "python", "python or bash")
	imgA := flag.String("a", "", "image A (before)")
	imgB := flag.String("b", "", "image B (after)")
	code := flag.String("code", "x = 1", "the code executed")
	pre := flag.String("pre", "", "code executed before each timed execution, not timed (x = 1 before x: the snapshot it causes is waited for)")
	n := flag.Int("n", 300, "executions on each side")
	snap := flag.String("snapshot", "", "the sessions' snapshot policy (default every)")
	stdoutMiB := flag.Int("stdout", 0, "instead of code: stream this many MiB of stdout, and report MiB/s")
	cold := flag.Int("cold", 0, "instead of round trips: this many new sessions a side, each Start to the result of the code (s)")
	idle := flag.Int("idle", 0, "instead of round trips: this many sessions a side, each running -setup, then idle with no client: the container's memory (MiB)")
	setup := flag.String("setup", "import numpy, pandas", "the code an -idle session runs first")
	var envs [2]multi
	flag.Var(&envs[0], "env-a", "KEY=VALUE for A's sessions (repeatable)")
	flag.Var(&envs[1], "env-b", "KEY=VALUE for B's sessions (repeatable)")
	flag.Parse()
	ctx := context.Background()
	e, err := docker.New("")
	check(err)
	c := session.NewWithEngine(e)
	defer c.Close()
	run := fmt.Sprint(time.Now().UnixNano() % 1e6)
	images := []string{*imgA, *imgB}
	spec := func(k int, name string) session.Spec {
		return session.Spec{Name: name, Lang: *lang, Image: images[k], Snapshot: *snap, Env: envs[k]}
	}
	if *cold > 0 {
		report(images, alternate(*cold, func(k, i int) float64 {
			name := fmt.Sprintf("abbench-%s-cold-%d-%d", run, k, i)
			t := time.Now()
			s, _, err := c.Start(ctx, spec(k, name))
			check(err)
			_, err = s.Exec(ctx, *code, session.ExecOptions{})
			d := time.Since(t)
			s.Close()
			check(err)
			check(c.Remove(ctx, name, true))
			return d.Seconds()
		}), "s")
		return
	}
	if *idle > 0 {
		d, err := bench.DialDocker(run)
		check(err)
		defer d.Close()
		var names [2][]string
		defer func() {
			for _, ns := range names {
				for _, n := range ns {
					_ = c.Remove(context.Background(), n, true)
				}
			}
		}()
		alternate(*idle, func(k, i int) float64 {
			name := fmt.Sprintf("abbench-%s-idle-%d-%d", run, k, i)
			names[k] = append(names[k], name)
			s, _, err := c.Start(ctx, spec(k, name))
			check(err)
			_, err = s.Exec(ctx, *setup, session.ExecOptions{})
			check(err)
			s.Close()
			return 0
		})
		time.Sleep(10 * time.Second) // the snapshots written, the agents quiet
		report(images, alternate(3, func(k, i int) float64 {
			var sum float64
			for _, n := range names[k] {
				u, err := d.MemoryUsage(ctx, containers.Name(n))
				check(err)
				sum += float64(u) / (1 << 20)
			}
			return sum / float64(len(names[k]))
		}), "MiB")
		return
	}
	var ss [2]*session.Session
	for i := range images {
		name := fmt.Sprintf("abbench-%s-%d", run, i)
		s, _, err := c.Start(ctx, spec(i, name))
		check(err)
		ss[i] = s
		defer func() { s.Close(); _ = c.Remove(context.Background(), name, true) }()
		for k := 0; k < 5; k++ {
			if *pre != "" {
				_, err := s.Exec(ctx, *pre, session.ExecOptions{})
				check(err)
			}
			_, err := s.Exec(ctx, *code, session.ExecOptions{})
			check(err)
		}
	}
	one := func(s *session.Session) float64 {
		t := time.Now()
		if *stdoutMiB > 0 {
			var first time.Time
			w := writerFunc(func(p []byte) {
				if first.IsZero() {
					first = time.Now()
				}
			})
			_, err := s.Exec(ctx, fmt.Sprintf("import sys; sys.stdout.buffer.write(b'x' * (%d << 20))", *stdoutMiB),
				session.ExecOptions{MaxOutput: int64(*stdoutMiB+1) << 20, StreamOnly: true, Stdout: w})
			check(err)
			return float64(*stdoutMiB) / time.Since(first).Seconds()
		}
		if *pre != "" {
			_, err := s.Exec(ctx, *pre, session.ExecOptions{})
			check(err)
			t = time.Now()
		}
		res, err := s.Exec(ctx, *code, session.ExecOptions{})
		check(err)
		if res.Status != "ok" {
			fmt.Fprintln(os.Stderr, "abbench: status", res.Status)
			os.Exit(1)
		}
		return float64(time.Since(t).Microseconds()) / 1000
	}
	v := alternate(*n, func(k, _ int) float64 { return one(ss[k]) })
	unit := "ms"
	if *stdoutMiB > 0 {
		unit = "MiB/s"
	}
	report(images, v, unit)
}

// alternate runs one(k, i) n times a side, A then B, then B then A, and returns the values.
func alternate(n int, one func(k, i int) float64) [2][]float64 {
	var v [2][]float64
	for i := 0; i < n; i++ {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			v[k] = append(v[k], one(k, i))
		}
	}
	return v
}

// report prints each side's p50 and p90 and the ratio B/A of the p50s.
func report(names []string, v [2][]float64, unit string) {
	p50 := [2]float64{}
	for k, name := range names {
		sort.Float64s(v[k])
		p50[k] = v[k][len(v[k])/2]
		fmt.Printf("%-32s p50 %8.3f %s  p90 %8.3f  n %d\n", name, p50[k], unit, v[k][len(v[k])*9/10], len(v[k]))
	}
	fmt.Printf("B/A p50 ratio %.3f\n", p50[1]/p50[0])
}

type multi []string

func (m *multi) String() string     { return fmt.Sprint(*m) }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

var _ io.Writer = writerFunc(nil)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "abbench:", err)
		os.Exit(1)
	}
}
