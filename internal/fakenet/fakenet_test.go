package fakenet_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/fakenet"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
)

// The fake internet answers by name from a client on its network that knows its addresses:
// HTTP, HTTPS with its own CA, two names for one host, and a package index pip installs from.
func TestTheFakeInternetServesItsHosts(t *testing.T) {
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var hosts []string
	for n, a := range in.Hosts() {
		hosts = append(hosts, n+":"+a[0])
	}
	client, err := testcontainers.Run(ctx, images.Ref(py),
		testcontainers.WithEntrypoint("sleep", "infinity"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.ExtraHosts = hosts }),
		testcontainers.WithFiles(testcontainers.ContainerFile{Reader: strings.NewReader(in.CAPEM), ContainerFilePath: "/tmp/ca.pem", FileMode: 0o644}),
		network.WithNetwork(nil, &testcontainers.DockerNetwork{Name: in.Network}),
		testcontainers.WithWaitStrategy(wait.ForExec([]string{"true"})),
	)
	testcontainers.CleanupContainer(t, client)
	require.NoError(t, err)
	run := func(cmd ...string) string {
		code, r, err := client.Exec(ctx, cmd, tcexec.Multiplexed())
		require.NoError(t, err)
		out, _ := io.ReadAll(r)
		require.Equal(t, 0, code, "%v: %s", cmd, out)
		return string(out)
	}
	out := run("python3", "-c", `
import json, ssl, urllib.request
for url in ["http://allowed.test/a", "http://twin.test:8080/b", "https://api.test/c", "http://denied.test/d"]:
    ctx = ssl.create_default_context(cafile="/tmp/ca.pem")
    print(json.load(urllib.request.urlopen(url, context=ctx, timeout=10))["server"])
`)
	assert.Equal(t, "web\nweb\nweb\nother\n", out)
	seen, err := in.Seen(ctx, fakenet.API)
	require.NoError(t, err)
	require.Len(t, seen, 3)
	assert.Equal(t, "twin.test:8080", seen[1].Host)
	assert.True(t, seen[2].TLS)
	assert.Equal(t, "/c", seen[2].Path)

	out = run("sh", "-c", "cd /tmp && python3 -m pip download --no-deps --index-url http://index.test/simple --trusted-host index.test -d /tmp/dl "+fakenet.ProbePackage+" >/dev/null && ls /tmp/dl && unzip -p /tmp/dl/*.whl rtctl_probe/__init__.py 2>/dev/null || python3 -c 'import zipfile,glob; print(zipfile.ZipFile(glob.glob(\"/tmp/dl/*.whl\")[0]).read(\"rtctl_probe/__init__.py\").decode())'")
	assert.Contains(t, out, "rtctl_probe-1.0-py3-none-any.whl")
	assert.Contains(t, out, "VALUE = 4242")
	assert.NotEmpty(t, in.Gateway)
	assert.Equal(t, in.Gateway, in.Addr(fakenet.EngineHost))
	assert.True(t, bytes.Contains([]byte(in.CAPEM), []byte("BEGIN CERTIFICATE")))
}
