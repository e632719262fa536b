package mcpserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/session"
)

func TestCutKeepsAQuarterOfHeadAndTheRestOfTailBetweenCharacters(t *testing.T) {
	head, tail, n := cut("short", 10)
	assert.Equal(t, "short", head)
	assert.Empty(t, tail)
	assert.Zero(t, n)

	s := strings.Repeat("é", 50) + strings.Repeat("x", 50) // 100 characters, 150 bytes
	head, tail, n = cut(s, 40)
	assert.Equal(t, 60, n)
	assert.Equal(t, strings.Repeat("é", 10), head)
	assert.Equal(t, strings.Repeat("x", 30), tail)
	assert.True(t, utf8.ValidString(head) && utf8.ValidString(tail))
}

func TestAnExecutionIsCutToTheBudgetAndTheTextSaysWhereTheRestIs(t *testing.T) {
	s := &Server{cfg: Config{OutputBudget: 100}}
	out := strings.Repeat("a", 500) + "END"
	res := &session.Result{Session: "demo", Seq: 3, Status: "ok", Stdout: out}
	e := s.execution(res)
	assert.Equal(t, 503, utf8.RuneCountInString(out))
	assert.Equal(t, 403, e.StdoutCut)
	assert.Contains(t, e.Stdout, "[... 403 characters cut ...]")
	assert.True(t, strings.HasSuffix(e.Stdout, "END"))
	text := s.clip(out, "stdout", "demo")
	assert.Contains(t, text, "runtimectl cut 403 characters of stdout")
	assert.Contains(t, text, "runtimectl://sessions/demo/history.ipynb")
	assert.Equal(t, out, s.clip(out[:50], "stdout", "demo")+out[50:], "within the budget nothing is cut")
}

func TestOutputURIsNameOnlyFilesOfTheOutputsFolder(t *testing.T) {
	u := outputURI("demo", "/workspace/outputs/exec-3-1.png")
	assert.Equal(t, "runtimectl://sessions/demo/outputs/exec-3-1.png", u)
	name, p, ok := parseURI(u)
	require.True(t, ok)
	assert.Equal(t, "demo", name)
	assert.Equal(t, "/workspace/outputs/exec-3-1.png", p)

	u = outputURI("demo", "/workspace/outputs/sub dir/a.html")
	assert.Equal(t, "runtimectl://sessions/demo/outputs/sub%20dir/a.html", u)
	_, p, ok = parseURI(u)
	require.True(t, ok)
	assert.Equal(t, "/workspace/outputs/sub dir/a.html", p)

	assert.Empty(t, outputURI("demo", "/workspace/data.csv"))
	assert.Empty(t, outputURI("demo", "/workspace/outputs/../secret"))

	name, what, ok := parseURI("runtimectl://sessions/demo/history.ipynb")
	assert.True(t, ok)
	assert.Equal(t, "demo", name)
	assert.Equal(t, historyFile, what)

	for _, bad := range []string{
		"runtimectl://sessions/demo/outputs/../../state/session.json",
		"runtimectl://sessions/demo/outputs/%2e%2e/x",
		"runtimectl://sessions/Bad!/history.ipynb",
		"runtimectl://sessions/demo/other",
		"file:///etc/passwd",
		"runtimectl://sessions/demo",
	} {
		_, _, ok := parseURI(bad)
		assert.False(t, ok, bad)
	}
}

func FuzzParseURIStaysInTheOutputsFolder(f *testing.F) {
	f.Add("runtimectl://sessions/demo/outputs/exec-1-1.png")
	f.Add("runtimectl://sessions/demo/outputs/%2e%2e/%2e%2e/x")
	f.Add("runtimectl://sessions/demo/history.ipynb")
	f.Fuzz(func(t *testing.T, uri string) {
		name, what, ok := parseURI(uri)
		if !ok {
			return
		}
		if session.ValidateName(name) != nil {
			t.Fatalf("%q: name %q", uri, name)
		}
		if what != historyFile && !strings.HasPrefix(what, outputsFolder) {
			t.Fatalf("%q: path %q outside the outputs folder", uri, what)
		}
	})
}

func TestWindowSkipsTheOffsetAndKeepsAtMostMax(t *testing.T) {
	w := &window{skip: 3, max: 4}
	for _, chunk := range []string{"ab", "cdef", "ghij"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n, "a window takes all it is given")
	}
	assert.Equal(t, "defg", w.buf.String())
}

func TestTrimPartialRuneDropsOnlyAnIncompleteLastCharacter(t *testing.T) {
	euro := []byte("a€")
	assert.Equal(t, "a", string(trimPartialRune(euro[:2])))
	assert.Equal(t, "a", string(trimPartialRune(euro[:3])))
	assert.Equal(t, "a€", string(trimPartialRune(euro)))
	assert.Equal(t, "abc", string(trimPartialRune([]byte("abc"))))
	assert.Empty(t, trimPartialRune(nil))
}

func TestPickToolsRefusesAnUnknownNameAndKeepsTheOrderGiven(t *testing.T) {
	all, err := pickTools(nil)
	require.NoError(t, err)
	assert.Len(t, all, 14)
	some, err := pickTools([]string{"read_file", " run_code", "read_file"})
	require.NoError(t, err)
	require.Len(t, some, 2)
	assert.Equal(t, "read_file", some[0].name)
	assert.Equal(t, "run_code", some[1].name)
	_, err = pickTools([]string{"rm_rf"})
	assert.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), `"rm_rf"`)
	assert.Contains(t, err.Error(), "run_code, start_session")
	_, err = pickTools([]string{})
	assert.ErrorIs(t, err, session.ErrInvalid)
}

func TestToolErrorsAreOneLineInTheCLIsWords(t *testing.T) {
	missing := advice.Errorf("%w %q: %s", session.ErrNotFound, "demo", advice.Words{Lib: "start it with Client.Start", CLI: "start it with `runtimectl session start demo`"})
	assert.Equal(t, `no such session "demo": start it with start_session, or see list_sessions`, toolError(missing).Error())
	assert.Equal(t, `no such session "demo": start it with start_session, or see list_sessions`,
		toolError(fmt.Errorf("%w %q: start it with POST /v1/sessions", session.ErrNotFound, "demo")).Error(), "the server's wording too")

	cap := advice.Errorf("disk full; %s", advice.Words{Lib: "free space with ExecOptions.IgnoreDiskCap", CLI: "free space with `--ignore-disk-cap`"})
	assert.Equal(t, "disk full; free space with `--ignore-disk-cap`", toolError(cap).Error())
	assert.Equal(t, "first line", toolError(errors.New("first line\nsecond line")).Error())
}

func TestMediaTypesAndText(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00")
	assert.Equal(t, "image/png", mimeOf("/workspace/a.png", png))
	assert.Equal(t, "image/png", mimeOf("/workspace/noext", png), "sniffed without an extension")
	assert.Equal(t, "text/html", mimeOf("/workspace/outputs/t.html", []byte("<table>")))
	assert.False(t, isText("image/png", png))
	assert.True(t, isText("text/csv", []byte("a,b\n1,2\n")))
	assert.True(t, isText("application/json", []byte(`{"a": 1}`)))
	assert.True(t, isText("application/octet-stream", []byte("plain words")))
	assert.False(t, isText("application/octet-stream", []byte("a\x00b")))
	assert.False(t, isText("text/plain", []byte{0xff, 0xfe}))
	assert.True(t, picture("image/webp"))
	assert.False(t, picture("image/svg+xml"), "a model is not shown SVG as an image")
}

func TestProgressCarriesTheLatestOutputWhole(t *testing.T) {
	p := &progress{done: make(chan struct{})}
	assert.Contains(t, p.message(2*time.Second), "no output yet")
	_, _ = p.Write([]byte(strings.Repeat("€", 2000)))
	_, _ = p.Write([]byte("last line\n"))
	msg := p.message(3 * time.Second)
	assert.True(t, utf8.ValidString(msg))
	assert.Contains(t, msg, "running for 3s")
	assert.Contains(t, msg, "6010 bytes of output so far")
	assert.True(t, strings.HasSuffix(msg, "last line\n"))
	assert.LessOrEqual(t, len(msg), progressTail+200)
	p.stop()
	p.stop() // twice: once only
}
