package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/fakenet"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// helpersFor lists the engine's helper containers that work for session name.
func helpersFor(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.runtimectl.helper-for="+name).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// The installer runs nothing of the workspace (issue 28): a session's own .venv/bin/python, a
// pip package in its working folder and a .pth in its venv stay unrun, and the install still
// lands; a requirement that pip would build is refused unless builds are allowed.
func TestTheInstallerRunsNothingOfTheWorkspace(t *testing.T) {
	c, _, index := localIndex(t, map[string][]byte{"tinypkg": testenv.Wheel(t, "tinypkg", 42)})
	host := fakenet.Index
	ctx := testenv.Ctx(t, 5*time.Minute)
	s := startEgress(t, c, session.Spec{})
	plant := `import os, stat
os.makedirs('.venv/bin', exist_ok=True)
os.makedirs('.venv/lib/python3.11/site-packages', exist_ok=True)
with open('.venv/bin/python', 'w') as f:
    f.write('#!/bin/sh\necho ran > /workspace/pwned-python\nexec /usr/bin/python3 "$@"\n')
os.chmod('.venv/bin/python', 0o755)
with open('.venv/pyvenv.cfg', 'w') as f:
    f.write('home = /usr/bin\ninclude-system-site-packages = true\n')
with open('.venv/lib/python3.11/site-packages/evil.pth', 'w') as f:
    f.write("import os; 'RUNTIMECTL_REQUIREMENTS' in os.environ and open('/workspace/pwned-pth', 'w').write('ran')\n")
os.makedirs('pip', exist_ok=True)
with open('pip/__init__.py', 'w') as f:
    f.write("open('/workspace/pwned-cwd', 'w').write('ran')\n")
with open('pip/__main__.py', 'w') as f:
    f.write("open('/workspace/pwned-cwd', 'w').write('ran')\n")
'planted'`
	r, err := s.Exec(ctx, plant, session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	require.NoError(t, c.Install(ctx, s.Name(), session.InstallOptions{Packages: []string{"tinypkg"}, IndexURL: index, TrustedHosts: []string{host}}))
	r, err = s.Exec(ctx, "import os, tinypkg\n(tinypkg.VALUE, sorted(f for f in os.listdir('/workspace') if f.startswith('pwned')))", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(42, [])", *r.Result, "installed, and nothing the session planted ran")

	for _, req := range []string{"./src", "git+https://example.invalid/x", "dist/x-1.0.tar.gz"} {
		err := c.Install(ctx, s.Name(), session.InstallOptions{Packages: []string{req}, IndexURL: index, TrustedHosts: []string{host}})
		require.ErrorIs(t, err, session.ErrInvalid, req)
		assert.Contains(t, err.Error(), "installing it would build it, which runs its code; give a wheel (.whl), or set InstallOptions.AllowBuilds")
	}
	_, err = s.Exec(ctx, "%pip install ./src", session.ExecOptions{})
	require.ErrorIs(t, err, session.ErrInvalid, "a cell's install builds nothing either")
	noHelpersLeft(t, s.Name(), "every installer and its proxy removed")
}

// An installer is bounded by its deadline, by its caller and by the session's removal, and is
// never taken for the session: a hanging index holds it while `ls` shows the session once and
// `rm --force` removes the session, its volumes, the installer and its proxy; another install
// stops at its timeout, another when its caller goes, and neither leaves a container or a
// volume behind; gc sweeps a proxy volume that a crash left.
func TestAnInstallerHasADeadlineAndIsNotTheSession(t *testing.T) {
	c, in, _ := localIndex(t, nil)
	ctx := testenv.Ctx(t, 5*time.Minute)
	hang := "http://" + fakenet.Index + "/hang/simple"
	trusted := []string{fakenet.Index}
	hangs := func() int {
		seen, err := in.Seen(ctx, fakenet.Index)
		require.NoError(t, err)
		n := 0
		for _, r := range seen {
			if strings.HasPrefix(r.Path, "/hang/") {
				n++
			}
		}
		return n
	}
	waitAsked := func(before int) {
		t.Helper()
		require.Eventually(t, func() bool { return hangs() > before }, 2*time.Minute, 200*time.Millisecond, "the installer never asked the index")
	}

	s := startEgress(t, c, session.Spec{})
	name := s.Name()
	start := time.Now()
	err := c.Install(ctx, name, session.InstallOptions{Packages: []string{"slowpkg"}, IndexURL: hang, TrustedHosts: trusted, Timeout: 5 * time.Second})
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not end within its deadline")
	t.Logf("the install with a 5s timeout ended after %s", took.Round(100*time.Millisecond))
	noHelpersLeft(t, name, "past its deadline")

	before := hangs()
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		gone <- c.Install(cctx, name, session.InstallOptions{Packages: []string{"slowpkg"}, IndexURL: hang, TrustedHosts: trusted, Timeout: 3 * time.Minute})
	}()
	waitAsked(before)
	cancel()
	select {
	case err := <-gone:
		assert.Error(t, err, "the install ends with its caller")
	case <-time.After(time.Minute):
		t.Fatal("the install did not end with its caller")
	}
	noHelpersLeft(t, name, "after its caller went")

	before = hangs()
	done := make(chan error, 1)
	go func() {
		done <- c.Install(context.Background(), name, session.InstallOptions{Packages: []string{"slowpkg"}, IndexURL: hang, TrustedHosts: trusted, Timeout: 3 * time.Minute})
	}()
	waitAsked(before)
	kinds := helperKinds(t, name)
	assert.ElementsMatch(t, []string{"install", "install-egress"}, kinds, "the installer and its proxy run")
	assert.Len(t, helperVolumesFor(t, name), 1, "the proxy's socket volume")
	list, err := c.List(ctx)
	require.NoError(t, err)
	seen := 0
	for _, in := range list {
		if in.Name == name {
			seen++
		}
	}
	assert.Equal(t, 1, seen, "`ls` shows the session once, not its installer")
	require.NoError(t, s.Close())
	require.NoError(t, c.Remove(ctx, name, true), "rm --force removes the session while an install runs")
	noHelpersLeft(t, name, "after rm --force")
	_, err = c.RecordedSettings(ctx, name)
	assert.ErrorIs(t, err, session.ErrNotFound, "its volumes are gone")
	select {
	case err := <-done:
		assert.Error(t, err, "the install ends with its installer")
	case <-time.After(time.Minute):
		t.Fatal("the install did not end with its installer")
	}

	// What a crash leaves (a controller killed mid-install: the installer and its proxy end at
	// their deadline and remove themselves, their volume stays), gc removes.
	left := "runtimectl_install-" + name + "-00c0ffee"
	past := strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)
	require.NoError(t, exec.Command("docker", "volume", "create", "--label", "io.runtimectl.helper=install-egress", "--label", "io.runtimectl.helper-for="+name, "--label", "io.runtimectl.deadline="+past, left).Run())
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", left).Run() })
	acts, err := c.GC(ctx, session.GCOptions{Only: []string{name}})
	require.NoError(t, err)
	var removed bool
	for _, a := range acts {
		removed = removed || (a.Action == "remove helper" && a.Done)
	}
	assert.True(t, removed, "gc removed the leftover volume: %+v", acts)
	assert.Empty(t, helperVolumesFor(t, name))
}

// pyQuote is s as a Python string literal (JSON's is one).
func pyQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// helperKinds lists the kinds (contract.LabelHelper) of the engine's helper containers that work
// for session name.
func helperKinds(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--format", `{{.Label "io.runtimectl.helper"}}`, "--filter", "label=io.runtimectl.helper-for="+name).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// netprobe is a Python project whose in-tree build backend, run by pip in the installer (an
// install that allows builds), tries every way out and writes what came back to
// /workspace/netprobe.json before it builds a harmless wheel.
const netprobeBackend = `import base64, hashlib, json, os, socket, urllib.error, urllib.request, zipfile

ADDRS = json.loads(os.environ.get("NETPROBE_ADDRS") or open(os.path.join(os.path.dirname(__file__), "addrs.json")).read())


def get_requires_for_build_wheel(config_settings=None):
    return []


def _probe():
    out = {}

    def get(url):
        try:
            return "reached %d" % urllib.request.urlopen(url, timeout=5).status
        except urllib.error.HTTPError as e:
            return "refused %d %s" % (e.code, e.read().decode("utf-8", "replace")[:300])
        except Exception as e:
            return "refused " + str(e)

    def tcp(addr, port):
        try:
            socket.create_connection((addr, port), timeout=3).close()
            return "reached"
        except Exception as e:
            return "refused " + str(e)

    out["index"] = get("http://index.test/simple/")
    out["denied"] = get("http://denied.test/")
    out["denied-index"] = get("http://denied-index.test/simple/")
    out["index by address"] = get("http://%s/simple/" % ADDRS["index"])
    for name, addr in ADDRS.items():
        out["tcp " + name] = tcp(addr, 80)
    out["tcp outside"] = tcp("1.1.1.1", 443)
    try:
        socket.getaddrinfo("denied.test", 80)
        out["dns denied"] = "reached"
    except Exception as e:
        out["dns denied"] = "refused " + str(e)
    with open("/workspace/netprobe.json", "w") as f:
        json.dump(out, f)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _probe()
    name = "netprobe-1.0-py3-none-any.whl"
    files = {
        "netprobe/__init__.py": "VALUE = 1\n",
        "netprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: netprobe\nVersion: 1.0\n",
        "netprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, c in files.items():
            z.writestr(p, c)
            d = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (p, d, len(c)))
        record.append("netprobe-1.0.dist-info/RECORD,,")
        z.writestr("netprobe-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return name
`

// The installer reaches its index and nothing else (issues 26 and 28): a package from another
// host of the fake internet (another name of the index's own host included, and the index by
// its address) is refused with the host named; code that runs in the installer (the build of a
// local project, which the operator allowed) reaches the index by name and nothing else: not
// another name, no address straight, not the engine's host, not the outside, no resolver for
// other names. A session with allowed hosts keeps them: its install's proxy is its own.
func TestTheInstallerReachesOnlyItsIndex(t *testing.T) {
	c, in, index := localIndex(t, nil)
	ctx := testenv.Ctx(t, 5*time.Minute)
	trusted := []string{fakenet.Index, fakenet.DeniedIndex, fakenet.Denied, in.Addr(fakenet.Index)}
	s := startEgress(t, c, session.Spec{AllowHosts: []string{fakenet.Allowed}})
	name := s.Name()

	var out bytes.Buffer
	require.NoError(t, c.Install(ctx, name, session.InstallOptions{Packages: []string{fakenet.ProbePackage}, IndexURL: index, TrustedHosts: trusted, Output: &out}), out.String())
	for _, u := range []string{
		"http://" + fakenet.DeniedIndex + "/files/" + fakenet.ProbeWheel,
		"http://" + fakenet.Denied + "/files/" + fakenet.ProbeWheel,
		"http://" + in.Addr(fakenet.Index) + "/files/" + fakenet.ProbeWheel,
		"http://" + fakenet.Allowed + "/files/" + fakenet.ProbeWheel,
	} {
		host := strings.Split(u, "/")[2]
		out.Reset()
		err := c.Install(ctx, name, session.InstallOptions{Packages: []string{u}, IndexURL: index, TrustedHosts: trusted, NoDeps: true, Output: &out})
		require.Error(t, err, u)
		assert.Contains(t, err.Error(), host, "the refusal names the host: %s", out.String())
		assert.Contains(t, err.Error(), "the installer reaches only "+fakenet.Index)
	}
	for _, h := range []string{fakenet.Denied, fakenet.Allowed} {
		seen, err := in.Seen(ctx, h)
		require.NoError(t, err)
		assert.Empty(t, seen, "%s got nothing", h)
	}
	seen, err := in.Seen(ctx, fakenet.Index)
	require.NoError(t, err)
	for _, r := range seen {
		assert.Equal(t, fakenet.Index, r.Host, "the index is reached by its name only: %s", r.Path)
	}

	addrs := map[string]string{"index": in.Addr(fakenet.Index), "denied": in.Addr(fakenet.Denied), "engine host": in.Gateway}
	ab, _ := json.Marshal(addrs)
	r, err := s.Exec(ctx, fmt.Sprintf(`import os
os.makedirs("netprobe", exist_ok=True)
open("netprobe/pyproject.toml", "w").write('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n')
open("netprobe/backend.py", "w").write(%s)
open("netprobe/addrs.json", "w").write(%s)
"ok"`, pyQuote(netprobeBackend), pyQuote(string(ab))), session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	out.Reset()
	require.NoError(t, c.Install(ctx, name, session.InstallOptions{Packages: []string{"/workspace/netprobe"}, IndexURL: index, TrustedHosts: trusted, AllowBuilds: true, Output: &out}), out.String())
	r, err = s.Exec(ctx, "import json\nprint(open('/workspace/netprobe.json').read())", session.ExecOptions{})
	require.NoError(t, err)
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &got), r.Stdout, r.Stderr)
	t.Logf("from inside the installer: %v", got)
	assert.Equal(t, "reached 200", got["index"])
	for k, v := range got {
		if k != "index" {
			assert.True(t, strings.HasPrefix(v, "refused"), "%s: %s", k, v)
		}
	}
	assert.Contains(t, got["denied"], fakenet.Denied, "the proxy's refusal names the host")
	assert.Contains(t, got["denied"], "installer of session "+name)

	// the session's own proxy is not widened by its installs
	r, err = s.Exec(ctx, "import urllib.request\ntry:\n    urllib.request.urlopen('http://"+fakenet.Index+"/simple/', timeout=5)\n    print('reached')\nexcept Exception as e:\n    print('refused', e)", session.ExecOptions{})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(r.Stdout, "refused"), r.Stdout)
	noHelpersLeft(t, name, "after the installs")
}
