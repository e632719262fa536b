package session

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
)

// fakeStream returns a client connected to a server that only greets it.
func fakeStream(t *testing.T) *execproto.Client {
	t.Helper()
	srv, cli := net.Pipe()
	go func() {
		sc, err := execproto.NewServerConn(srv, execproto.Hello{Lang: "python"})
		if err != nil {
			return
		}
		for {
			if _, err := sc.Next(); err != nil {
				return
			}
		}
	}()
	c, err := execproto.NewClient(context.Background(), cli)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// Goroutines that find the stream gone at the same moment open one new stream between them:
// none is opened and leaked.
func TestConcurrentReconnectsOpenOneStream(t *testing.T) {
	var starts atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	s := &Session{name: "x"}
	s.start = func(ctx context.Context) (*Session, StartInfo, error) {
		if starts.Add(1) == 1 {
			close(entered)
		}
		<-release
		return &Session{name: "x", conn: fakeStream(t)}, StartInfo{}, nil
	}
	var wg sync.WaitGroup
	got := make([]*execproto.Client, 2)
	for i := range got {
		if i == 1 {
			<-entered // the first is reopening the stream now
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := s.client(context.Background())
			assert.NoError(t, err)
			got[i] = c
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the second reach the reopening too
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), starts.Load(), "one stream opened")
	assert.Same(t, got[0], got[1])
}
