package bench

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// The Go benchmarks measure the hot paths one at a time, for profiling
// (`go test -bench . -cpuprofile cpu.out ./bench/`); `make bench` runs the side-by-side driver.

func BenchmarkExecRoundTrip(b *testing.B) {
	for _, policy := range []string{"every", "manual"} {
		b.Run("snapshot="+policy, func(b *testing.B) {
			c := testenv.Client(b)
			s := testenv.Start(b, c, session.Spec{Snapshot: policy})
			ctx := testenv.Ctx(b, 10*time.Minute)
			for i := 0; i < 20; i++ {
				if _, err := s.Exec(ctx, "x = 1", session.ExecOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Exec(ctx, "x = 1", session.ExecOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDockerEchoRoundTrip(b *testing.B) {
	testenv.Images(b)
	ctx := testenv.Ctx(b, 10*time.Minute)
	d, err := DialDocker("gotest-" + NewRunID())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.RemoveAll(context.Background()); d.Close() })
	id, err := d.Run(ctx, ContainerSpec{Image: PythonImage, Entrypoint: []string{"sleep", "infinity"}})
	if err != nil {
		b.Fatal(err)
	}
	es, err := d.Exec(ctx, id, []string{"cat"}, "", true)
	if err != nil {
		b.Fatal(err)
	}
	defer es.Close()
	msg, back := bytes.Repeat([]byte("e"), 100), make([]byte, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := es.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(es, back); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdout100MiB(b *testing.B) {
	c := testenv.Client(b)
	s := testenv.Start(b, c, session.Spec{})
	ctx := testenv.Ctx(b, 10*time.Minute)
	b.SetBytes(100 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Exec(ctx, StdoutCode, session.ExecOptions{MaxOutput: 200 << 20, StreamOnly: true, Stdout: io.Discard}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0, 1}} {
		if got := quantile(s, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestCompareTargets(t *testing.T) {
	r := NewResults(Machine{})
	r.Add("a", Ms, "lower", "", 1, 2, 3)
	r.Add("b", Ms, "lower", "", 10, 20, 30)
	r.Compare("a", "b", Target{"ratio", "<=", 0.05})
	f := r.Get("a")
	if f.Ratio == nil || *f.Ratio != 0.1 || f.Met == nil || *f.Met {
		t.Fatalf("ratio %v met %v, want 0.1 and false", f.Ratio, f.Met)
	}
	r.Compare("a", "b", Target{"delta", "<=", 5})
	if c := f.Comparisons[1]; c.Delta != -18 || c.Met == nil || !*c.Met {
		t.Fatalf("second comparison %+v", c)
	}
	var buf bytes.Buffer
	r.PrintTable(&buf)
	if !bytes.Contains(buf.Bytes(), []byte("MISSED")) || !bytes.Contains(buf.Bytes(), []byte("MET")) {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func TestBoundChecksTheFigureItself(t *testing.T) {
	r := NewResults(Machine{})
	r.Add("bash", Ms, "lower", "", 1.5, 2.5, 1.8)
	r.Bound("bash", Target{"value", "<=", 2})
	f := r.Get("bash")
	if f.Met == nil || !*f.Met || f.Target != "value <= 2" {
		t.Fatalf("met %v target %q, want met and value <= 2", f.Met, f.Target)
	}
	r.Add("slow", Ms, "lower", "", 3, 4)
	r.Bound("slow", Target{"value", "<=", 2})
	if f := r.Get("slow"); f.Met == nil || *f.Met {
		t.Fatalf("slow: met %v, want missed", f.Met)
	}
}
