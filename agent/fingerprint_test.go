package agent

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/lang"
)

func TestFingerprintLeavesOutTheIgnoredLinesOfItsFirstPartOnly(t *testing.T) {
	ignore := map[string]bool{"declare -- _": true, "declare -a FUNCNAME": true, "declare -- LINENO": true}
	for _, tc := range []struct{ name, in, want string }{
		{"nothing ignored", "declare -- x=\"1\"\n\nf () \n", "declare -- x=\"1\"\n\nf () \n"},
		{"by the text before the first =", "declare -- _=\"a=b\"\ndeclare -- x=\"1\"\n", "declare -- x=\"1\"\n"},
		{"a line without =", "declare -- LINENO\ndeclare -- x\n", "declare -- x\n"},
		{"a longer name is another name", "declare -- LINENOS=\"1\"\ndeclare -- _x=\"2\"\n", "declare -- LINENOS=\"1\"\ndeclare -- _x=\"2\"\n"},
		{"not after the empty line", "declare -a FUNCNAME=([0]=\"f\")\n\ndeclare -- _=\"in a heredoc\"\n", "\ndeclare -- _=\"in a heredoc\"\n"},
		{"no newline at the end", "declare -- x=\"1\"\ndeclare -- _=\"z\"", "declare -- x=\"1\"\n"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(comparable([]byte(tc.in), ignore)))
		})
	}
}

func TestFingerprintFileIsReadEmptiedAndCompared(t *testing.T) {
	p, err := newFingerprints()
	require.NoError(t, err)
	defer p.close()
	write := func(s string) { // as the driver does, at the shared offset
		_, err := p.f.WriteString(s)
		require.NoError(t, err)
	}
	write("declare -- _=\"1\"\ndeclare -- x=\"1\"\n")
	p.start(kernelEvent{FingerprintIgnore: []string{"declare -- _"}})
	write("declare -- _=\"2\"\ndeclare -- x=\"1\"\n")
	assert.False(t, p.changed(), "only an ignored line differs")
	write("declare -- x=\"2\"\n")
	assert.True(t, p.changed())
	write("declare -- x=\"2\"\n")
	assert.False(t, p.changed(), "the file was emptied after each read")
	assert.True(t, p.changed(), "an empty file after a fingerprint")

	var none *fingerprints
	assert.True(t, none.changed(), "a driver without the file: always changed")
}

// The real bash driver (kernels/bash/kernel.bash, when bash is installed) under the agent: its
// fingerprint decides which executions are followed by a snapshot.
func TestBashDriverFingerprintDecidesWhatChanged(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	driver, err := filepath.Abs("../kernels/bash/kernel.bash")
	require.NoError(t, err)
	cfg := stubConfig(t)
	cfg.Lang = lang.Lang{Name: "bash", Kernel: []string{bash, "--noprofile", "--norc", driver}, Fingerprint: true}
	s := startStub(t, cfg)
	c := s.client(t)
	// changed runs code and reports whether a snapshot followed it (then waited for, so that the
	// next execution's state says only what it did).
	changed := func(code string) bool {
		t.Helper()
		r := execStub(t, c, code, 0)
		require.Equal(t, "ok", string(r.Status), code)
		require.NotNil(t, r.State, code)
		if r.State.Status == "unchanged" {
			return false
		}
		drain(t, c)
		return true
	}
	assert.False(t, changed("echo hi"), "the first execution, against the fingerprint at start")
	assert.True(t, changed("x=1"))
	assert.False(t, changed("x=1"))
	assert.False(t, changed("false || :"), "a status is not state")
	assert.False(t, changed("echo $RANDOM $SECONDS $LINENO; ls / >/dev/null"))
	assert.True(t, changed("f() { echo $x; }"))
	assert.False(t, changed(":"), "after the snapshot the driver built")
	assert.True(t, changed("f() { echo two; }"), "a function's body")
	assert.True(t, changed("alias ll='ls -l'"))
	assert.True(t, changed("alias ll='ls -la'"), "an alias's value")
	assert.True(t, changed("set -o pipefail"))
	assert.True(t, changed("cd /"))
	assert.False(t, changed("true"))
	drain(t, c)

	s = restart(t, s)
	c = s.client(t)
	r := execStub(t, c, "f; alias ll; [[ -o pipefail ]] && pwd", 0)
	assert.Equal(t, "two\nalias ll='ls -la'\n/\n", r.Stdout)
	assert.Equal(t, "unchanged", string(r.State.Status), "after a restore")
	assert.True(t, changed("unset x"))
}
