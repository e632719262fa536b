package fakenet

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
)

// probes is Python that tries every way out of a session and prints one JSON object: for each
// probe, what came back (the first line of the error, or "ok ...") and how long it took. It
// needs DENIED_ADDR, PORTS (name → port → the port that reaches it) and DIRECT (probe → [host,
// port]) before it.
const probes = `
import json, socket, ssl, struct, time, urllib.request, os
ctx = ssl.create_default_context(cafile="/workspace/fakenet-ca.pem")
out = {}
def probe(name, f):
    t = time.monotonic()
    try:
        r = f()
        res = "ok " + str(r)
    except Exception as e:
        msg = str(e)
        if hasattr(e, "read"):
            try: msg += " " + e.read().decode()
            except Exception: pass
        res = "err " + type(e).__name__ + ": " + msg
    out[name] = {"res": res.strip(), "secs": time.monotonic() - t}
def port(host, p):
    return PORTS.get(host, {}).get(str(p), p)
def url(scheme, host, p, path):
    p = port(host, p)
    if p == {"http": 80, "https": 443}[scheme]: return "%s://%s%s" % (scheme, host, path)
    return "%s://%s:%d%s" % (scheme, host, p, path)
def get(u, c=None):
    return json.load(urllib.request.urlopen(u, timeout=10, context=c))
def direct(host, p, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(5)
    try: s.connect((host, p)); return "connected"
    finally: s.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    q = struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\x07example\x03com\x00\x00\x01\x00\x01"
    s.sendto(q, ("8.8.8.8", 53)); return s.recvfrom(512)
def mismatch():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    target = "allowed.test:%d" % port("allowed.test", 443)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = s.recv(4096).decode()
    if " 200" not in head.split("\r\n")[0]: return "no tunnel: " + head
    c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
    t = c.wrap_socket(s, server_hostname="denied.test")
    t.sendall(b"GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n"); return t.recv(100)
def host_mismatch():
    s = socket.create_connection(("allowed.test", port("allowed.test", 80)), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n")
    return s.recv(4096).decode().split("\r\n")[0] + " " + s.recv(4096).decode()[-200:]
probe("http", lambda: get(url("http", "allowed.test", 80, "/a"))["server"])
probe("https", lambda: get(url("https", "allowed.test", 443, "/b"), ctx)["server"])
probe("denied", lambda: get(url("http", "denied.test", 80, "/")))
probe("denied_https", lambda: get(url("https", "denied.test", 443, "/"), ctx))
probe("twin", lambda: get(url("http", "twin.test", 80, "/")))
probe("ipv4_proxy", lambda: get(url("http", DENIED_ADDR, port("denied.test", 80), "/")))
probe("ipv4_direct", lambda: direct(DENIED_ADDR, port("denied.test", 80)))
probe("ipv6_direct", lambda: direct("2001:db8::1", 80, socket.AF_INET6))
probe("port", lambda: get(url("http", "allowed.test", 8080, "/")))
probe("udp", udp)
probe("dns_denied", lambda: socket.getaddrinfo("denied.test", 80))
probe("dns_allowed", lambda: socket.getaddrinfo("allowed.test", 80)[0][4][0])
probe("sni_mismatch", mismatch)
probe("host_mismatch", host_mismatch)
probe("engine_host", lambda: get("http://host.test/"))
probe("env", lambda: os.environ.get("HTTPS_PROXY"))
for name, (h, p) in DIRECT.items():
    probe(name, lambda h=h, p=p: direct(h, p))
print(json.dumps(out))
`

// Probes returns the Python that tries every way out of a session against this fake internet
// (the session needs its CA at /workspace/fakenet-ca.pem) and prints, as JSON, a ProbeResult
// per probe: http and https to Allowed (which the test allows) and dns_allowed should succeed,
// everything else fail. direct are more probes (name → address and port) that connect straight.
func (in *Internet) Probes(direct map[string]DirectProbe) string {
	ports := map[string]map[string]int{}
	for n, ps := range in.ports {
		ports[n] = map[string]int{}
		for p, to := range ps {
			ports[n][strconv.Itoa(p)] = to
		}
	}
	if direct == nil {
		direct = map[string]DirectProbe{}
	}
	pj, _ := json.Marshal(ports)
	dj, _ := json.Marshal(direct)
	aj, _ := json.Marshal(in.Addr(Denied))
	return "DENIED_ADDR = " + string(aj) + "\nPORTS = " + string(pj) + "\nDIRECT = " + string(dj) + "\n" + probes
}

// DirectProbe is an address and port a probe connects to straight: [host, port] in JSON.
type DirectProbe struct {
	Host string
	Port int
}

// MarshalJSON writes [host, port].
func (d DirectProbe) MarshalJSON() ([]byte, error) { return json.Marshal([]any{d.Host, d.Port}) }

// ProbeResult is what one probe got: Res is "ok ..." or "err TYPE: message".
type ProbeResult struct {
	Res  string  `json:"res"`
	Secs float64 `json:"secs"`
}

// PipDownload is Python that runs `pip download` of ProbePackage from the index at index (a
// name, or name:port) through the session's proxy, and prints pip's exit status and seconds on
// the first line, then the ends of its output.
func PipDownload(index string) string {
	return `
import subprocess, sys, time
t = time.monotonic()
p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "5", "--index-url", "http://` + index + `/simple", "--trusted-host", "` + index + `", "-d", "/tmp/dl-` + index + `", "` + ProbePackage + `"], capture_output=True, text=True)
print(p.returncode, round(time.monotonic() - t, 1))
print(p.stdout[-600:], p.stderr[-600:])
`
}

// CheckProbes decodes what Probes printed (stdout), logs it, and checks what every session
// that allows Allowed (HTTP and HTTPS) and EngineHost must show: Allowed reached over HTTP and
// HTTPS, its name resolved to the session's loopback, HTTPS_PROXY set; every other probe
// (direct's too) failed, each within a second; the proxy's refusals (a Host that is not the name
// asked for among them) an HTTP 403 naming the host and --allow-host; TLS for another name in a
// tunnel for Allowed cut. It returns the results for more checks.
func (in *Internet) CheckProbes(t testing.TB, stdout string) map[string]ProbeResult {
	t.Helper()
	var got map[string]ProbeResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(stdout)), &got), stdout)
	for name, p := range got {
		t.Logf("%-20s %.3fs %s", name, p.Secs, p.Res)
	}
	ok := map[string]string{"http": "ok web", "https": "ok web", "env": "ok " + contract.EgressProxyURL, "dns_allowed": "ok 127.0.0.1"}
	for name, want := range ok {
		assert.Equal(t, want, got[name].Res, name)
	}
	assert.Contains(t, got["host_mismatch"].Res, "HTTP/1.1 403 ", "a Host that is not the name asked for")
	for name, p := range got {
		if _, isOK := ok[name]; !isOK && name != "host_mismatch" {
			assert.True(t, strings.HasPrefix(p.Res, "err "), "%s: %s", name, p.Res)
		}
		assert.Less(t, p.Secs, 1.0, "%s took %.2fs: %s", name, p.Secs, p.Res)
	}
	for name, host := range map[string]string{"denied": Denied, "twin": Twin, "ipv4_proxy": in.Addr(Denied), "port": Allowed, "engine_host": EngineHost, "host_mismatch": Denied} {
		assert.Contains(t, got[name].Res, host, name)
		assert.Contains(t, got[name].Res, "--allow-host", name)
	}
	assert.Contains(t, got["sni_mismatch"].Res, "SSL", "the TLS handshake for another name is cut")
	return got
}
