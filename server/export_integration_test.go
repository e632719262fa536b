package server_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
	"github.com/runtimectl/runtimectl/session"
)

// readSlowly reads r at about rate bytes a second for at most d, then stops: a slow client
// that leaves.
func readSlowly(r io.Reader, rate int64, d time.Duration) int64 {
	var n int64
	buf := make([]byte, 64<<10)
	start := time.Now()
	for time.Since(start) < d {
		m, err := r.Read(buf)
		n += int64(m)
		if err != nil {
			break
		}
		if ahead := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return n
}

// hasFile says whether the session still has /workspace/PATH of size bytes.
func hasFile(t *testing.T, c *session.Client, name, path string, size int64) bool {
	t.Helper()
	info, err := c.Runtimes().Stat(testenv.Ctx(t, time.Minute), name, "/workspace/"+path)
	return err == nil && info.Exists && info.Size == size
}

// gone waits until the API says the session does not exist.
func gone(a api, name string) bool {
	for i := 0; i < 100; i++ {
		if st, _ := a.do("GET", "/v1/sessions/"+name, nil, nil); st == http.StatusNotFound {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// wholeExport reads an export to its end and checks it against its length and digest; it
// returns the tar's files.
func wholeExport(t *testing.T, resp *http.Response) map[string][]byte {
	t.Helper()
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, resp.Header.Get("Content-Length"), strconv.Itoa(len(body)))
	sum := sha256.Sum256(body)
	assert.Equal(t, resp.Header.Get(server.ExportDigestHeader), hex.EncodeToString(sum[:]))
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(body))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	return files
}

const bigFile = "import os\nwith open('data.bin', 'wb') as f:\n    f.write(os.urandom(50 << 20))\nopen('notes.txt', 'w').write('kept')"

// With a 50 MB file, a client reading at 2 MB/s for 4 s used to get a 10 MB truncated tar with
// the session already gone. Now the session stays until the whole tar is written.
func TestAnExportIsNotLostWhenTheClientIsSlowOrLeaves(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, func(cfg *server.Config) { cfg.WriteTimeout = 2 * time.Second })
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	r := a.exec(name, bigFile)
	require.Equal(t, "ok", r.Status, r.Stderr)
	del := "/v1/sessions/" + name + "?force=true&keep=*.bin&keep=*.txt&keep_history=true"

	// A client that reads at 2 MB/s for 4 s, then leaves.
	resp := a.req("DELETE", del, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	n := readSlowly(resp.Body, 2<<20, 4*time.Second)
	resp.Body.Close()
	t.Logf("the slow client took %d MB of %s", n>>20, resp.Header.Get("Content-Length"))
	require.Less(t, n, int64(50<<20))
	time.Sleep(3 * time.Second)
	assert.True(t, hasFile(t, c, name, "data.bin", 50<<20), "the session and its files are kept")

	// A client that stops reading: cut off after the write timeout, the session kept.
	resp = a.req("DELETE", del, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	time.Sleep(5 * time.Second)
	resp.Body.Close()
	assert.True(t, hasFile(t, c, name, "data.bin", 50<<20), "a stalled client removes nothing")

	// remove=false: the whole export, the session kept; a plain DELETE is the acknowledgement.
	resp = a.req("DELETE", del+"&remove=false", nil, nil)
	assert.Equal(t, "false", resp.Header.Get(server.ExportRemovedHeader))
	files := wholeExport(t, resp)
	assert.Len(t, files["data.bin"], 50<<20)
	assert.Equal(t, "kept", string(files["notes.txt"]))
	assert.Contains(t, files, "history.json")
	assert.True(t, hasFile(t, c, name, "data.bin", 50<<20))

	// Read whole, the session is removed.
	resp = a.req("DELETE", del, nil, nil)
	assert.Equal(t, "true", resp.Header.Get(server.ExportRemovedHeader))
	files = wholeExport(t, resp)
	assert.Len(t, files["data.bin"], 50<<20)
	assert.True(t, gone(a, name), "removed once the whole tar was written")
}

// A serve killed in the middle of an export loses nothing; the export is asked again of the
// next one.
func TestAnExportSurvivesARestartOfServe(t *testing.T) {
	c := testenv.Client(t)
	tokens := tokenFile(t)
	p := startServe(t, tokens)
	a := api{t: t, base: p.base, token: tokA}
	name := startSession(t, c, a, nil)
	r := a.exec(name, bigFile)
	require.Equal(t, "ok", r.Status, r.Stderr)
	del := "/v1/sessions/" + name + "?force=true&keep=*.bin"
	resp := a.req("DELETE", del, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	n := readSlowly(resp.Body, 4<<20, 2*time.Second)
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.wait(t, 30*time.Second)
	resp.Body.Close()
	t.Logf("serve killed after %d MB of the export", n>>20)
	assert.True(t, hasFile(t, c, name, "data.bin", 50<<20), "the session is kept")

	p2 := startServe(t, tokens)
	a.base = p2.base
	files := wholeExport(t, a.req("DELETE", del, nil, nil))
	assert.Len(t, files["data.bin"], 50<<20)
	assert.True(t, gone(a, name))
}
