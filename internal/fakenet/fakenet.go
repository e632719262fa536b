package fakenet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/go-connections/nat"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/runtimectl/runtimectl/egress/proxy"
)

//go:embed server.py
var serverPy string

// The fake internet's names. Web is one host known by three names: Allowed (which tests allow),
// Twin (the same host by another name, which they do not) and API (for secret headers).
const (
	Allowed     = "allowed.test"
	Twin        = "twin.test"
	API         = "api.test"
	Denied      = "denied.test"       // another host
	Index       = "index.test"        // the package index
	DeniedIndex = "denied-index.test" // the same index by a name tests do not allow
	EngineHost  = "host.test"         // the engine's host: the network's gateway
)

// Internet is a running fake internet.
type Internet struct {
	// Network is the Docker network of its hosts: the egress proxy's outside network in tests.
	Network string
	// Gateway is the engine's host's address on Network.
	Gateway string
	// CAPEM is the CA of its HTTPS certificates: the proxy's upstream CA in tests.
	CAPEM string

	hosts   map[string]string                   // name → address
	servers map[string]testcontainers.Container // name → the container that serves it
	ports   map[string]map[int]int              // name → its port → the port that reaches it (Published)
}

// Ports are the ports every host serves: HTTP, HTTP on another port, HTTPS.
var Ports = []int{80, 8080, 443}

// Option changes how Start makes the fake internet.
type Option func(*options)

type options struct {
	published string
	wheels    map[string][]byte
}

// Published publishes every host's Ports on this machine's addresses (ports Docker picks) and
// names each host by addr, an address of this machine, instead of its container's: for a
// cluster whose pods cannot reach the Docker network but reach this machine (the local
// Kubernetes's node). Port says which port reaches which.
func Published(addr string) Option { return func(o *options) { o.published = addr } }

type hostDef struct {
	names []string
	env   map[string]string
	files map[string][]byte
}

// WithWheels adds packages to the index: a name → its wheel (testenv.Wheel(t, name, value)),
// at http://Index/simple/NAME/. The index also answers every path under /hang/ by never
// answering (an index that hangs), after recording the request.
func WithWheels(wheels map[string][]byte) Option {
	return func(o *options) { o.wheels = wheels }
}

// Start starts the fake internet's hosts from image (runtimectl's Python image) on a network of
// their own, removed at the end of the test.
func Start(t testing.TB, image string, opts ...Option) *Internet {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nw, err := network.New(ctx, network.WithLabels(map[string]string{"io.runtimectl.test": "fakenet"}))
	if err != nil {
		t.Fatalf("fakenet: network: %v", err)
	}
	t.Cleanup(func() { nw.Remove(context.Background()) })

	caCert, caKey, err := proxy.NewCA("fakenet", []string{"test"})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := proxy.LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	in := &Internet{Network: nw.Name, CAPEM: string(caCert), hosts: map[string]string{}, servers: map[string]testcontainers.Container{}, ports: map[string]map[int]int{}}
	defs := []hostDef{
		{names: []string{Allowed, Twin, API}, env: map[string]string{"FAKENET_NAME": "web"}},
		{names: []string{Denied}, env: map[string]string{"FAKENET_NAME": "other"}},
		{names: []string{Index, DeniedIndex}, env: map[string]string{"FAKENET_NAME": "index", "FAKENET_ROOT": "/srv"}, files: indexFiles(t, o.wheels)},
	}
	for _, d := range defs {
		cert, err := ca.Leaf(d.names...)
		if err != nil {
			t.Fatal(err)
		}
		key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		var chain bytes.Buffer
		for _, der := range cert.Certificate {
			pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
		files := []testcontainers.ContainerFile{
			{Reader: bytes.NewReader(chain.Bytes()), ContainerFilePath: "/certs/cert.pem", FileMode: 0o644},
			{Reader: bytes.NewReader(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})), ContainerFilePath: "/certs/key.pem", FileMode: 0o600},
		}
		for _, p := range slices.Sorted(maps.Keys(d.files)) {
			files = append(files, testcontainers.ContainerFile{Reader: bytes.NewReader(d.files[p]), ContainerFilePath: "/srv/" + p, FileMode: 0o644})
		}
		var expose []string
		if o.published != "" {
			for _, p := range Ports {
				expose = append(expose, fmt.Sprintf("%d/tcp", p))
			}
		}
		ctr, err := testcontainers.Run(ctx, image,
			testcontainers.WithExposedPorts(expose...),
			testcontainers.WithEntrypoint("python3", "-c", serverPy),
			testcontainers.WithEnv(d.env),
			testcontainers.WithLabels(map[string]string{"io.runtimectl.test": "fakenet"}),
			testcontainers.WithFiles(files...),
			network.WithNetwork(nil, nw),
			testcontainers.WithWaitStrategy(wait.ForLog("fakenet ready").WithStartupTimeout(time.Minute)),
		)
		testcontainers.CleanupContainer(t, ctr)
		if err != nil {
			t.Fatalf("fakenet: host %s: %v", d.names[0], err)
		}
		info, err := ctr.Inspect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ep := info.NetworkSettings.Networks[nw.Name]
		if ep == nil || ep.IPAddress == "" {
			t.Fatalf("fakenet: host %s has no address on %s", d.names[0], nw.Name)
		}
		in.Gateway = ep.Gateway
		ports, addr := map[int]int{}, ep.IPAddress
		for _, p := range Ports {
			ports[p] = p
			if o.published != "" {
				mp, err := ctr.MappedPort(ctx, nat.Port(fmt.Sprintf("%d/tcp", p)))
				if err != nil {
					t.Fatalf("fakenet: host %s: port %d: %v", d.names[0], p, err)
				}
				ports[p], addr = mp.Int(), o.published
			}
		}
		for _, n := range d.names {
			in.hosts[n] = addr
			in.servers[n] = ctr
			in.ports[n] = ports
		}
	}
	in.hosts[EngineHost] = in.Gateway
	return in
}

// Hosts are the fake internet's names and addresses, as egress.Config.Hosts takes them.
func (in *Internet) Hosts() map[string][]string {
	out := map[string][]string{}
	for n, a := range in.hosts {
		out[n] = []string{a}
	}
	return out
}

// Addr returns the address of name.
func (in *Internet) Addr(name string) string { return in.hosts[name] }

// Port returns the port that reaches port (one of Ports) of the host serving name: port itself
// unless Published.
func (in *Internet) Port(name string, port int) int {
	if p, ok := in.ports[name][port]; ok {
		return p
	}
	return port
}

// Request is one request a host got.
type Request struct {
	Server  string            `json:"server"`
	Port    int               `json:"port"`
	TLS     bool              `json:"tls"`
	Method  string            `json:"method"`
	Host    string            `json:"host"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// Seen returns the requests that the host serving name got, oldest first.
func (in *Internet) Seen(ctx context.Context, name string) ([]Request, error) {
	ctr, ok := in.servers[name]
	if !ok {
		return nil, fmt.Errorf("fakenet: no host %s", name)
	}
	code, r, err := ctr.Exec(ctx, []string{"sh", "-c", "cat /tmp/seen.jsonl 2>/dev/null || true"}, tcexec.Multiplexed())
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(r)
	if err != nil || code != 0 {
		return nil, fmt.Errorf("fakenet: read what %s saw: exit %d: %v", name, code, err)
	}
	var reqs []Request
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			var req Request
			if err := json.Unmarshal([]byte(line), &req); err != nil {
				return nil, fmt.Errorf("fakenet: %q: %w", line, err)
			}
			reqs = append(reqs, req)
		}
	}
	return reqs, nil
}
