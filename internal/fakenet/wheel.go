package fakenet

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// The package the fake index serves: `pip install rtctl-probe` gets module rtctl_probe, whose
// VALUE is ProbeValue.
const (
	ProbePackage = "rtctl-probe"
	ProbeModule  = "rtctl_probe"
	ProbeValue   = 4242
	probeWheel   = "rtctl_probe-1.0-py3-none-any.whl"
)

// indexFiles is a PEP 503 simple index with the probe: path → content.
func indexFiles(t testing.TB) map[string][]byte {
	whl := testenv.Wheel(t, ProbeModule, ProbeValue)
	sum := sha256.Sum256(whl)
	return map[string][]byte{
		"simple/index.html": []byte(`<!DOCTYPE html><html><body><a href="` + ProbePackage + `/">` + ProbePackage + `</a></body></html>` + "\n"),
		"simple/" + ProbePackage + "/index.html": []byte(`<!DOCTYPE html><html><body><a href="../../files/` + probeWheel + `#sha256=` +
			hex.EncodeToString(sum[:]) + `">` + probeWheel + `</a></body></html>` + "\n"),
		"files/" + probeWheel: whl,
	}
}
