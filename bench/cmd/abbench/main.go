// Command abbench compares two builds of the session images in one interleaved run: one session
// of each, the same code executed on A then B (then B then A) round after round, so that the
// load of a shared machine falls on both alike. It prints the p50 and p90 of each side and the
// ratio B/A of the p50s.
//
//	go run ./bench/cmd/abbench -lang bash -a runtimectl/bash:old -b runtimectl/bash:new -code 'x=1' -n 300
//	go run ./bench/cmd/abbench -a runtimectl/python:old -b runtimectl/python:new -stdout 100   # MiB/s of 100 MiB streamed
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

func main() {
	lang := flag.String("lang", "python", "python or bash")
	imgA := flag.String("a", "", "image A (before)")
	imgB := flag.String("b", "", "image B (after)")
	code := flag.String("code", "x = 1", "the code executed")
	n := flag.Int("n", 300, "executions on each side")
	snap := flag.String("snapshot", "", "the sessions' snapshot policy (default every)")
	stdoutMiB := flag.Int("stdout", 0, "instead of code: stream this many MiB of stdout, and report MiB/s")
	flag.Parse()
	ctx := context.Background()
	e, err := docker.New("")
	check(err)
	c := session.NewWithEngine(e)
	defer c.Close()
	run := fmt.Sprint(time.Now().UnixNano() % 1e6)
	var ss [2]*session.Session
	for i, img := range []string{*imgA, *imgB} {
		name := fmt.Sprintf("abbench-%s-%d", run, i)
		s, _, err := c.Start(ctx, session.Spec{Name: name, Lang: *lang, Image: img, Snapshot: *snap})
		check(err)
		ss[i] = s
		defer func() { s.Close(); _ = c.Remove(context.Background(), name, true) }()
		for k := 0; k < 5; k++ {
			_, err := s.Exec(ctx, *code, session.ExecOptions{})
			check(err)
		}
	}
	var v [2][]float64
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
		res, err := s.Exec(ctx, *code, session.ExecOptions{})
		check(err)
		if res.Status != "ok" {
			fmt.Fprintln(os.Stderr, "abbench: status", res.Status)
			os.Exit(1)
		}
		return float64(time.Since(t).Microseconds()) / 1000
	}
	for i := 0; i < *n; i++ {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			v[k] = append(v[k], one(ss[k]))
		}
	}
	unit := "ms"
	if *stdoutMiB > 0 {
		unit = "MiB/s"
	}
	p50 := [2]float64{}
	for k, name := range []string{*imgA, *imgB} {
		sort.Float64s(v[k])
		p50[k] = v[k][len(v[k])/2]
		fmt.Printf("%-32s p50 %8.3f %s  p90 %8.3f  n %d\n", name, p50[k], unit, v[k][len(v[k])*9/10], len(v[k]))
	}
	fmt.Printf("B/A p50 ratio %.3f\n", p50[1]/p50[0])
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

var _ io.Writer = writerFunc(nil)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "abbench:", err)
		os.Exit(1)
	}
}
