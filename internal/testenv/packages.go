package testenv

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Wheel builds a pure-Python wheel of one module, name, whose VALUE is value: a package to
// install with no package index.
func Wheel(t testing.TB, name string, value int) []byte {
	t.Helper()
	files := [][2]string{
		{name + "/__init__.py", fmt.Sprintf("VALUE = %d\n", value)},
		{name + "-1.0.dist-info/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n", name)},
		{name + "-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: runtimectl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	add := func(path, content string) {
		w, err := zw.Create(path)
		if err == nil {
			_, err = w.Write([]byte(content))
		}
		if err != nil {
			t.Fatalf("wheel %s: %v", name, err)
		}
	}
	for _, f := range files {
		add(f[0], f[1])
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	rec := name + "-1.0.dist-info/RECORD"
	fmt.Fprintf(&record, "%s,,\n", rec)
	add(rec, record.String())
	if err := zw.Close(); err != nil {
		t.Fatalf("wheel %s: %v", name, err)
	}
	return buf.Bytes()
}

// ServeOnBridge serves h on every address of the host until the test ends, and returns its base
// URL as containers on the engine's default bridge reach it (through the bridge's gateway), and
// that gateway: an installer container's package index.
func ServeOnBridge(t testing.TB, h http.Handler) (base, gateway string) {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "-f", "{{(index .IPAM.Config 0).Gateway}},{{(index .IPAM.Config 0).Subnet}}").Output()
	if err != nil {
		t.Fatalf("docker network inspect bridge: %v", err)
	}
	gw, subnet, _ := strings.Cut(strings.TrimSpace(string(out)), ",")
	if gw == "" || gw == "<no value>" {
		// The engine gives the bridge the first address of its subnet when none is configured.
		ip, _, err := net.ParseCIDR(subnet)
		if err != nil {
			t.Fatalf("bridge subnet %q: %v", subnet, err)
		}
		ip = ip.To4()
		ip[3]++
		gw = ip.String()
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("http://%s:%d", gw, ln.Addr().(*net.TCPAddr).Port), gw
}
