package runtimectl

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every file of a kernel driver is in the assets the images are built from: go:embed leaves
// out names that begin with "_" or ".", which a driver's module must not have.
func TestEveryKernelFileIsEmbedded(t *testing.T) {
	err := filepath.WalkDir("kernels", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".pyc") || strings.Contains(p, "__pycache__") {
			return err
		}
		if _, err := fs.Stat(Assets, filepath.ToSlash(p)); err != nil {
			t.Errorf("%s is not embedded (a name that begins with _ or . is left out by go:embed): %v", p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
