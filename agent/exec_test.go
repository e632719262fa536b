package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
)

func TestCodeTravelsAsBase64OnlyWhenJSONCannotCarryItCheaply(t *testing.T) {
	assert.False(t, needsBase64("X=1; echo \"$X\" > out.txt"), "small, valid UTF-8: JSON only")
	assert.False(t, needsBase64("echo héllo 🙂"), "non-ASCII UTF-8 is fine in JSON")
	assert.False(t, needsBase64(strings.Repeat("x", base64Above-1)))
	assert.True(t, needsBase64(strings.Repeat("x", base64Above)), "large code")
	assert.True(t, needsBase64("printf '\xff'"), "invalid UTF-8 would become U+FFFD")
	assert.True(t, needsBase64("a\x00b"), "NUL")
}

// Outputs carry their files' content only from the outputs folder itself, with no link
// followed: code that replaces the folder or a file with a link gets a path, not root's read.
func TestAttachOutputDataFollowsNoLink(t *testing.T) {
	ws := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's"), 0o600))
	out := filepath.Join(ws, "outputs")
	require.NoError(t, os.Mkdir(out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "fig.png"), []byte("png"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(out, "link.png")))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "elsewhere.png"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, "big.png"), make([]byte, execproto.OutputDataMax+1), 0o644))
	outs := []execproto.Output{{Path: filepath.Join(out, "fig.png")}, {Path: filepath.Join(out, "link.png")},
		{Path: filepath.Join(ws, "elsewhere.png")}, {Path: filepath.Join(out, "big.png")}, {Path: filepath.Join(out, "../outputs/fig.png")}}
	attachOutputData(ws, outs)
	assert.Equal(t, "png", string(outs[0].Data))
	assert.Empty(t, outs[1].Data, "a link is not followed")
	assert.Empty(t, outs[2].Data, "only the outputs folder")
	assert.Empty(t, outs[3].Data, "past OutputDataMax")
	assert.Equal(t, "png", string(outs[4].Data), "the same file, spelled otherwise")

	// The folder itself replaced by a link to elsewhere.
	require.NoError(t, os.RemoveAll(out))
	require.NoError(t, os.Symlink(filepath.Dir(secret), out))
	outs = []execproto.Output{{Path: filepath.Join(out, "secret")}}
	attachOutputData(ws, outs)
	assert.Empty(t, outs[0].Data, "an outputs folder that is a link is not entered")
}
