package session

import (
	"testing"

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
