package images_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
)

// Docker's overlay storage ignores the mode that an image's layers give its root directory;
// rootless Podman's storage does not, and a root of mode 0700 (what a debootstrap in a
// `mktemp -d` directory gives) leaves the session user unable to exec anything. So every layer
// of every session image that names the root must give it 0755.
func TestSessionImagesHaveA0755Root(t *testing.T) {
	testenv.Images(t)
	cli, err := containers.Dial("")
	require.NoError(t, err)
	defer cli.Close()
	for _, n := range []string{"bash", "python"} {
		t.Run(n, func(t *testing.T) {
			l, err := lang.Get(n)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			rc, err := cli.ImageSave(ctx, []string{images.Ref(l)})
			require.NoError(t, err)
			defer rc.Close()
			roots, layers := rootModes(t, rc)
			require.Positive(t, layers, "docker save gave no layers")
			for layer, mode := range roots {
				assert.Equal(t, fs.FileMode(0o755), mode.Perm(), "the root directory in layer %s", layer)
			}
		})
	}
}

// rootModes reads a `docker save` stream (the legacy layout, `ID/layer.tar`, or the OCI one,
// `blobs/sha256/...`) and returns the mode each layer gives its root directory, for the layers
// that name it, and the number of layers read.
func rootModes(t *testing.T, r io.Reader) (map[string]fs.FileMode, int) {
	out := map[string]fs.FileMode{}
	layers := 0
	outer := tar.NewReader(r)
	for {
		h, err := outer.Next()
		if errors.Is(err, io.EOF) {
			return out, layers
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg || !(path.Base(h.Name) == "layer.tar" || strings.HasPrefix(h.Name, "blobs/")) {
			continue
		}
		inner := tar.NewReader(outer)
		first := true
		for {
			ih, err := inner.Next()
			if err != nil {
				break // the end of the layer, or a blob that is not a tar (a config, a manifest)
			}
			if first {
				layers++
				first = false
			}
			if name := strings.TrimPrefix(ih.Name, "./"); name == "" || name == "/" || name == "." {
				out[h.Name] = ih.FileInfo().Mode()
			}
		}
	}
}
