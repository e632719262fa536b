package server_test

import (
	"archive/tar"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// A download over --max-download is refused before anything is copied (the server's temp
// folder used to fill with all of it first); a folder is measured in a pass that stops at the
// budget; the transfers of one token at once are capped.
func TestDownloadsCheckTheSizeFirstAndAreCappedPerToken(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := testenv.Client(t)
	base := newServer(t, c, func(cfg *server.Config) {
		cfg.MaxDownload = 64 << 20
		cfg.MaxTransfers = 2
		cfg.WriteTimeout = 5 * time.Minute
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	})
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	r := a.exec(name, "import os\nopen('big.bin', 'wb').truncate(96 << 20)\n"+
		"os.makedirs('many', exist_ok=True)\nfor i in range(4):\n    open(f'many/{i}.bin', 'wb').truncate(20 << 20)\n"+
		"open('mid.bin', 'wb').truncate(48 << 20)\nos.makedirs('small/sub', exist_ok=True)\nopen('small/sub/a.txt', 'w').write('A')")
	require.Equal(t, "ok", r.Status, r.Stderr)
	b := api{t: t, base: base, token: tokB}
	other := startSession(t, c, b, nil)

	// Watch the server's temp folder while it answers.
	var peak atomic.Int64
	var seen sync.Map
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			// What the server would copy there (the test's own helpers build the agent there).
			if es, err := os.ReadDir(tmp); err == nil {
				var n int64
				for _, e := range es {
					if e.Name() != "runtimectl-agent-build" {
						seen.Store(e.Name(), true)
						n += dirBytes(filepath.Join(tmp, e.Name()))
					}
				}
				peak.Store(max(peak.Load(), n))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	st, raw := a.do("GET", "/v1/sessions/"+name+"/files/big.bin", nil, nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, st)
	assert.Contains(t, string(raw), "holds 100663296 bytes, over the server's cap of 67108864 (serve --max-download)")
	took := time.Since(start)
	st, raw = a.do("GET", "/v1/sessions/"+name+"/files/many", nil, nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, st)
	assert.Contains(t, string(raw), "holds more than 67108864 bytes")
	close(stop)
	<-watched
	var names []string
	seen.Range(func(k, _ any) bool { names = append(names, k.(string)); return true })
	t.Logf("413 for 96 MiB in %s; the server's temp folder held at most %d bytes (%v)", took, peak.Load(), names)
	assert.Zero(t, peak.Load(), "nothing was copied to the server's disk")
	assert.Less(t, took, 5*time.Second)

	resp := a.req("GET", "/v1/sessions/"+name+"/files/small", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tr := tar.NewReader(resp.Body)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	resp.Body.Close()
	assert.Equal(t, "A", got["small/sub/a.txt"], "%v", got)

	// Two downloads held open by clients that read nothing: a third is 429, for this token only.
	var held []*http.Response
	for i := 0; i < 2; i++ {
		resp := a.req("GET", "/v1/sessions/"+name+"/files/mid.bin", nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "50331648", resp.Header.Get("Content-Length"))
		held = append(held, resp)
	}
	st, raw = a.do("GET", "/v1/sessions/"+name+"/files/small", nil, nil)
	assert.Equal(t, http.StatusTooManyRequests, st)
	assert.Contains(t, string(raw), "file transfers of this token run already (the cap, serve --max-transfers)")
	st, _ = a.do("PUT", "/v1/sessions/"+name+"/files/up.txt", []byte("x"), nil)
	assert.Equal(t, http.StatusTooManyRequests, st, "uploads count too")
	st, _ = b.do("PUT", "/v1/sessions/"+other+"/files/up.txt", []byte("x"), nil)
	assert.Equal(t, http.StatusNoContent, st, "another token has its own cap")
	n, err := io.Copy(io.Discard, held[0].Body)
	require.NoError(t, err)
	assert.Equal(t, int64(48<<20), n)
	for _, h := range held {
		h.Body.Close()
	}
	ok := false
	for i := 0; i < 50 && !ok; i++ {
		st, _ = a.do("GET", "/v1/sessions/"+name+"/files/small", nil, nil)
		ok = st == http.StatusOK
		time.Sleep(100 * time.Millisecond)
	}
	assert.True(t, ok, "a slot is free again once the transfers end")
	entries, _ := os.ReadDir(tmp)
	var left []string
	for _, e := range entries {
		if e.Name() != "runtimectl-agent-build" {
			left = append(left, e.Name())
		}
	}
	assert.Empty(t, left)
	_ = context.Background()
}
