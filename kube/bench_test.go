package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
)

// BenchmarkPodStart measures a session's pod from create to a running agent answering its
// hello through pods/exec (claims bound beforehand, image present on the node).
func BenchmarkPodStart(b *testing.B) {
	kb := cluster(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench-start-%d", i)
		provision(b, kb, name)
		s := bashSpec(name)
		_, err := kb.Storage().Create(ctx, name, "bash", s.Settings, engine.VolumeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := kb.Create(ctx, s); err != nil {
			b.Fatal(err)
		}
		if err := kb.Start(ctx, name); err != nil {
			b.Fatal(err)
		}
		running := time.Since(start)
		c := connect(b, kb, name)
		b.ReportMetric(float64(running.Milliseconds()), "ms-to-running")
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-to-hello")
		c.Close()
		stop := time.Now()
		if err := kb.Stop(ctx, name, 5*time.Second); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(stop).Milliseconds()), "ms-to-stop")
	}
}

// BenchmarkExecRoundTrip measures one small execution over an open pods/exec stream, and the
// cost of opening a stream (one pods/exec of `runtime-agent connect` plus the hello).
func BenchmarkExecRoundTrip(b *testing.B) {
	kb := cluster(b)
	newSession(b, kb, "bench-rt", bashSpec("bench-rt"))
	c := connect(b, kb, "bench-rt")
	ctx := context.Background()
	b.Run("exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.Exec(ctx, execproto.Request{Code: "true"}, execproto.Handlers{}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open-stream", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rwc, err := kb.Dial(ctx, "bench-rt")
			if err != nil {
				b.Fatal(err)
			}
			cc, err := execproto.NewClient(ctx, rwc)
			if err != nil {
				b.Fatal(err)
			}
			cc.Close()
		}
	})
}
