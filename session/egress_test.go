package session_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/fakenet"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

const egressSecret = "tok-3f9c1a7e5b2d4c6f8a0b"

func egressClient(t *testing.T, in *fakenet.Internet, opts ...session.Option) *session.Client {
	t.Helper()
	testenv.Images(t)
	e, err := docker.New("")
	require.NoError(t, err)
	c := session.NewWithEngine(e, append(opts, session.WithEgress(session.EgressOptions{
		Network: in.Network, Hosts: in.Hosts(), UpstreamCAs: in.CAPEM,
		Lookup: func(name string) (string, bool) {
			if name == "EGRESS_TEST_SECRET" {
				return egressSecret, true
			}
			return "", false
		},
	}))...)
	t.Cleanup(func() { c.Close() })
	return c
}

func startEgress(t *testing.T, c *session.Client, spec session.Spec) *session.Session {
	t.Helper()
	ctx := testenv.Ctx(t, 3*time.Minute)
	if spec.Name == "" {
		spec.Name = testenv.Name(t)
	}
	spec.TestRun = session.TestRunID()
	t.Cleanup(func() { _ = c.Remove(context.Background(), spec.Name, true) })
	s, _, err := c.Start(ctx, spec)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func egressRun(t *testing.T, s *session.Session, code string) *session.Result {
	t.Helper()
	r, err := s.Exec(testenv.Ctx(t, 2*time.Minute), code, session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, contract.StatusOK, r.Status, "stdout %s\nstderr %s", r.Stdout, r.Stderr)
	return r
}

// A session started with --allow-host reaches the allowed names over HTTP and HTTPS, and
// everything else is refused at once with a message that names the host and the flag: other
// names (and the allowed host by another name), addresses (v4 and v6, through the proxy or
// straight), other ports, UDP, DNS to another resolver, an SNI or a Host that is not the name
// asked for, the engine's host. Refusals are in `session logs` and counted.
func TestEgressReachesOnlyTheAllowedHosts(t *testing.T) {
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py))
	c := egressClient(t, in)
	s := startEgress(t, c, session.Spec{AllowHosts: []string{"allowed.test", fakenet.EngineHost}})
	ctx := testenv.Ctx(t, 5*time.Minute)
	require.NoError(t, s.WriteFile(ctx, "fakenet-ca.pem", strings.NewReader(in.CAPEM)))

	r := egressRun(t, s, in.Probes(nil))
	in.CheckProbes(t, r.Stdout)
	// The hosts saw only what was allowed.
	seen, err := in.Seen(ctx, fakenet.Denied)
	require.NoError(t, err)
	assert.Empty(t, seen, "denied.test got no request")

	logs, err := c.Logs(ctx, s.Name(), 1<<20)
	require.NoError(t, err)
	assert.Contains(t, string(logs), "egress refused denied.test:80")
	ref, err := c.EgressRefusals(ctx, s.Name())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ref.Total, int64(8), "%+v", ref.ByReason)
	assert.Positive(t, ref.ByReason["not_allowed"])
	assert.Positive(t, ref.ByReason["address"])
	assert.Positive(t, ref.ByReason["mismatch"])

	// The settings, inspect and a start that asks for other hosts.
	ins, err := c.Inspect(ctx, s.Name())
	require.NoError(t, err)
	assert.Equal(t, []string{"allowed.test", "host.test"}, ins.Settings.AllowHosts)
	_, _, err = c.Start(ctx, session.Spec{Name: s.Name(), AllowHosts: []string{"denied.test"}})
	require.ErrorIs(t, err, session.ErrConflict)
	assert.Contains(t, err.Error(), "AllowHosts denied.test (the session has allowed.test,host.test)")
	_, _, err = c.Start(ctx, session.Spec{Name: s.Name(), AllowHosts: []string{"host.test,allowed.test"}})
	require.NoError(t, err, "the same hosts in another order are no conflict")

	// Stop and start: the proxy stops and starts with the session.
	require.NoError(t, c.Stop(ctx, s.Name()))
	raw, err := docker.From(c).Containers().Raw(ctx, s.Name())
	require.NoError(t, err)
	assert.Equal(t, "none", string(raw.HostConfig.NetworkMode))
	s2, _, err := c.Open(ctx, s.Name())
	require.NoError(t, err)
	defer s2.Close()
	r = egressRun(t, s2, "import json, urllib.request; print(json.load(urllib.request.urlopen('http://allowed.test/again', timeout=10))['server'])")
	assert.Equal(t, "web\n", r.Stdout)
}

// pip installs from an allowed index and fails, at once, from one that is not allowed.
func TestEgressPipFromAnAllowedIndexOnly(t *testing.T) {
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py))
	c := egressClient(t, in)
	s := startEgress(t, c, session.Spec{AllowHosts: []string{fakenet.Index}})
	pip := func(index string) *session.Result {
		r, err := s.Exec(testenv.Ctx(t, 3*time.Minute), fakenet.PipDownload(index), session.ExecOptions{})
		require.NoError(t, err)
		return r
	}
	ok := pip(fakenet.Index)
	assert.True(t, strings.HasPrefix(ok.Stdout, "0 "), ok.Stdout)
	assert.Contains(t, ok.Stdout, "Saved")
	bad := pip(fakenet.DeniedIndex)
	assert.False(t, strings.HasPrefix(bad.Stdout, "0 "), bad.Stdout)
	assert.Contains(t, bad.Stdout, "denied-index.test")
}

// A secret header reaches its host and nothing of it is in the session: not in the code's
// environment, nor any process's (/proc), the container's configuration, the responses, the
// history, the variables or the snapshots.
func TestEgressSecretHeaderNeverInTheSession(t *testing.T) {
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py))
	c := egressClient(t, in)
	s := startEgress(t, c, session.Spec{AllowHosts: []string{"api.test", "allowed.test"}, SecretHeaders: []string{"api.test=X-Api-Key:EGRESS_TEST_SECRET"}})
	ctx := testenv.Ctx(t, 5*time.Minute)
	r := egressRun(t, s, `
import json, os, urllib.request, glob
resp = urllib.request.urlopen("https://api.test/secret", timeout=10).read().decode()
plain = urllib.request.urlopen("http://allowed.test/plain", timeout=10).read().decode()
environ = "".join(open(p, "rb").read().decode("latin-1") for p in glob.glob("/proc/[0-9]*/environ") if os.access(p, os.R_OK))
found = [k for k, v in os.environ.items() if "`+egressSecret[:8]+`" in v]
print(json.dumps({"resp": resp, "plain": plain, "environ_has": "`+egressSecret[:8]+`" in environ, "env": found}))
`)
	var got struct {
		Resp, Plain string
		EnvironHas  bool `json:"environ_has"`
		Env         []string
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &got), r.Stdout)
	assert.Contains(t, got.Resp, `"server": "web"`)
	assert.NotContains(t, got.Resp, egressSecret, "the proxy takes the value out of the response")
	assert.False(t, got.EnvironHas)
	assert.Empty(t, got.Env)
	seen, err := in.Seen(ctx, fakenet.API)
	require.NoError(t, err)
	var api, plain int
	for _, req := range seen {
		switch req.Path {
		case "/secret":
			api++
			assert.Equal(t, egressSecret, req.Headers["X-Api-Key"], "the host got the header")
			assert.True(t, req.TLS)
		case "/plain":
			plain++
			assert.Empty(t, req.Headers["X-Api-Key"], "another host does not get it")
		}
	}
	assert.Equal(t, 1, api)
	assert.Equal(t, 1, plain)

	// Nothing the session keeps has it.
	egressRun(t, s, "kept = resp; x = 1")
	_, err = s.Snapshot(ctx)
	require.NoError(t, err)
	vars, err := s.Vars(ctx)
	require.NoError(t, err)
	b, _ := json.Marshal(vars)
	assert.NotContains(t, string(b), egressSecret)
	execs, _, err := c.History(ctx, s.Name())
	require.NoError(t, err)
	b, _ = json.Marshal(execs)
	assert.NotContains(t, string(b), egressSecret)
	rc, err := c.Runtimes().CopyFrom(ctx, s.Name(), contract.StateDir)
	require.NoError(t, err)
	n := 0
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data, _ := io.ReadAll(tr)
		n++
		assert.False(t, bytes.Contains(data, []byte(egressSecret)), "%s holds the secret", h.Name)
	}
	rc.Close()
	assert.Greater(t, n, 3, "the state was read")
	raw, err := docker.From(c).Containers().Raw(ctx, s.Name())
	require.NoError(t, err)
	b, _ = json.Marshal(raw)
	assert.NotContains(t, string(b), egressSecret, "the session's container's configuration")
	ins, err := c.Inspect(ctx, s.Name())
	require.NoError(t, err)
	assert.Equal(t, []string{"api.test=X-Api-Key:EGRESS_TEST_SECRET"}, ins.Settings.SecretHeaders)
}

// Two sessions with different allowlists each reach their own hosts only; removing a session
// removes its proxy and the proxy's volume.
func TestEgressAllowlistsAreNotShared(t *testing.T) {
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py))
	c := egressClient(t, in)
	a := startEgress(t, c, session.Spec{AllowHosts: []string{"allowed.test"}})
	b := startEgress(t, c, session.Spec{AllowHosts: []string{"denied.test"}, Lang: "bash"})
	code := func(host string) string {
		return "import urllib.request\ntry:\n    print(urllib.request.urlopen('http://" + host + "/', timeout=5).status)\nexcept Exception as e:\n    print('refused', e)"
	}
	assert.Equal(t, "200\n", egressRun(t, a, code("allowed.test")).Stdout)
	assert.Contains(t, egressRun(t, a, code("denied.test")).Stdout, "refused")
	rb := egressRun(t, b, "(exec 3<>/dev/tcp/denied.test/80 && printf 'GET / HTTP/1.0\\r\\nHost: denied.test\\r\\n\\r\\n' >&3 && head -1 <&3); (exec 3<>/dev/tcp/allowed.test/80) 2>/dev/null || echo no-allowed")
	assert.Contains(t, rb.Stdout, "200", rb.Stdout)
	assert.Contains(t, rb.Stdout, "no-allowed", rb.Stdout)

	ctx := testenv.Ctx(t, 2*time.Minute)
	require.NoError(t, c.Remove(ctx, a.Name(), true))
	_, err := docker.From(c).Containers().Raw(ctx, a.Name())
	assert.ErrorIs(t, err, containers.ErrNotFound)
	ref, err := c.EgressRefusals(ctx, a.Name())
	require.NoError(t, err)
	assert.Zero(t, ref.Total, "the proxy went with the session")
}

// A warm pool of sessions with allowed hosts: its members have their proxies ready, a start
// with the same hosts takes one, and the session reaches its hosts through the member's proxy
// under the session's name; a start with other hosts does not take a member.
func TestEgressFromAWarmPool(t *testing.T) {
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py))
	c := egressClient(t, in)
	ctx := testenv.Ctx(t, 5*time.Minute)
	pool := "eg" + strings.ToLower(testenv.Name(t)[len(testenv.Name(t))-6:])
	require.NoError(t, c.SetPool(ctx, session.Pool{Name: pool, Lang: "python", Size: 1, AllowHosts: []string{"allowed.test"}}))
	t.Cleanup(func() { _ = c.RemovePool(context.Background(), pool) })
	_, _, err := c.FillPool(ctx, pool)
	require.NoError(t, err)
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	s, info, err := c.Start(ctx, session.Spec{Name: name, AllowHosts: []string{"allowed.test"}})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, pool, info.Pool, "taken from the pool")
	r := egressRun(t, s, "import urllib.request\nprint(urllib.request.urlopen('http://allowed.test/p', timeout=5).status)\ntry:\n    urllib.request.urlopen('http://denied.test/', timeout=5)\nexcept Exception as e:\n    print('refused', e)")
	assert.Contains(t, r.Stdout, "200\nrefused")
	ref, err := c.EgressRefusals(ctx, name)
	require.NoError(t, err)
	assert.Positive(t, ref.Total, "the member's proxy is the session's")
	require.NoError(t, c.Remove(ctx, name, true))
	ref, err = c.EgressRefusals(ctx, name)
	require.NoError(t, err)
	assert.Zero(t, ref.Total, "removed with the session")
}
