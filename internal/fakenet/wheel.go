package fakenet

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// The package the fake index serves: `pip install rtctl-probe` gets module rtctl_probe, whose
// VALUE is ProbeValue.
const (
	ProbePackage = "rtctl-probe"
	ProbeModule  = "rtctl_probe"
	ProbeValue   = 4242
	// ProbeWheel is the probe's file, at http://Index/files/ProbeWheel.
	ProbeWheel = "rtctl_probe-1.0-py3-none-any.whl"
)

// indexFiles is a PEP 503 simple index with the probe and the extra wheels (a module name →
// its wheel, as testenv.Wheel makes it): path → content.
func indexFiles(t testing.TB, extra map[string][]byte) map[string][]byte {
	wheels := map[string][]byte{ProbePackage: testenv.Wheel(t, ProbeModule, ProbeValue)}
	maps.Copy(wheels, extra)
	files := map[string][]byte{}
	var links strings.Builder
	for _, pkg := range slices.Sorted(maps.Keys(wheels)) {
		whl := wheels[pkg]
		file := strings.ReplaceAll(pkg, "-", "_") + "-1.0-py3-none-any.whl"
		sum := sha256.Sum256(whl)
		links.WriteString(`<a href="` + pkg + `/">` + pkg + `</a>`)
		files["simple/"+pkg+"/index.html"] = []byte(`<!DOCTYPE html><html><body><a href="../../files/` + file + `#sha256=` +
			hex.EncodeToString(sum[:]) + `">` + file + `</a></body></html>` + "\n")
		files["files/"+file] = whl
	}
	files["simple/index.html"] = []byte(`<!DOCTYPE html><html><body>` + links.String() + `</body></html>` + "\n")
	return files
}
