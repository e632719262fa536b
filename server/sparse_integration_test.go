package server_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

// A few KB of sparse tar PUT to the files route count at their apparent size against the
// session's disk cap (issue 28): 1 GiB of holes into a 64 MiB session is refused, and nothing
// of it lands.
func TestASparseUploadCountsAgainstTheDiskCap(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, map[string]any{"disk": "64m"})

	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "holes.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())
	tarFile := filepath.Join(t.TempDir(), "sparse.tar")
	out, err := exec.Command("tar", "--format=posix", "--sparse", "-cf", tarFile, "-C", dir, "holes.bin").CombinedOutput()
	require.NoError(t, err, string(out))
	st, err := os.Stat(tarFile)
	require.NoError(t, err)
	require.Less(t, st.Size(), int64(64<<10), "the tar itself is small")
	body, err := os.ReadFile(tarFile)
	require.NoError(t, err)

	resp := a.req("PUT", "/v1/sessions/"+name+"/files/in/", body, map[string]string{"Content-Type": server.TarType})
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	assert.Contains(t, string(raw), "sparse files count at their full size")
	r := a.exec(name, "import os\nos.path.exists('in/holes.bin')")
	assert.Equal(t, "False", *r.Result)
}
