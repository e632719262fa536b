package session_test

// The hostile-code and fault matrix of issue 4: each row of the README's reliability table is a
// test here (the CLI-level rows, Ctrl-C and concurrent CLI processes, are in cli/exec_test.go;
// `session cp` escapes in agentneeds_test.go; the soak in soak_test.go). The tests assert
// states and orderings, never timings: a hang shows up as a watchdog failure.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/cli"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// assertShows checks what a language's check code shows: Python's final expression, or what a
// bash or Node check prints.
func assertShows(t *testing.T, lang, want string, r *session.Result) {
	t.Helper()
	if lang == "python" {
		require.NotNil(t, r.Result, "no result; stderr %q", r.Stderr)
		assert.Equal(t, want, *r.Result)
		return
	}
	assert.Equal(t, want, r.Stdout)
}

// execWith runs code with options; a call that does not return within 3 minutes fails the test
// (the hang is the bug) instead of blocking the whole test binary.
func execWith(t *testing.T, s *session.Session, code string, o session.ExecOptions) *session.Result {
	t.Helper()
	const limit = 3 * time.Minute
	type out struct {
		r   *session.Result
		err error
	}
	ch := make(chan out, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		r, err := s.Exec(ctx, code, o)
		ch <- out{r, err}
	}()
	select {
	case o := <-ch:
		require.NoError(t, o.err)
		return o.r
	case <-time.After(limit):
		t.Fatalf("the execution did not return within %s: %q", limit, code)
		return nil
	}
}

func startedAt(t *testing.T, c *session.Client, name string) time.Time {
	t.Helper()
	ci, err := docker.From(c).Containers().Inspect(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	require.True(t, ci.Running)
	return ci.StartedAt
}

func historyOf(t *testing.T, c *session.Client, name string) []history.Execution {
	t.Helper()
	execs, problems, err := c.History(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	assert.Empty(t, problems)
	return execs
}

func execBySeq(t *testing.T, execs []history.Execution, seq int64) history.Execution {
	t.Helper()
	for _, e := range execs {
		if e.Seq == seq {
			return e
		}
	}
	t.Fatalf("execution %d is not in the history", seq)
	return history.Execution{}
}

// startedSignal returns a Stdout writer and a channel closed once "started" was printed.
func startedSignal() (io.Writer, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var seen []byte
	return testenv.WriterFunc(func(p []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, p...)
		if bytes.Contains(seen, []byte("started")) {
			once.Do(func() { close(ch) })
		}
	}), ch
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// --- timeouts and interrupts -------------------------------------------------------------------

func TestTimeoutInterruptsAPythonLoop(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	require.Equal(t, "ok", string(run(t, s, "kept = 41").Status))
	before := startedAt(t, c, s.Name())

	r := execWith(t, s, "n = 0\nwhile True:\n    n += 1", session.ExecOptions{Timeout: time.Second})
	assert.Equal(t, "timeout", string(r.Status), r.Stderr)
	assert.Contains(t, r.Message, "timeout")
	require.NotNil(t, r.Error)
	assert.Equal(t, "KeyboardInterrupt", r.Error.Name, "SIGINT became KeyboardInterrupt: the kernel was not restarted")
	assert.NotContains(t, r.Error.Traceback, "kernel.py", "the traceback ends at the user's frame, not the driver's")
	assert.Contains(t, r.Error.Traceback, `File "<exec-2>"`)

	r = run(t, s, "(kept + 1, n > 0)")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(42, True)", *r.Result, "earlier variables are intact, and so is what the loop did")
	assert.Equal(t, before, startedAt(t, c, s.Name()), "the same container")
	assert.Equal(t, "timeout", string(execBySeq(t, historyOf(t, c, s.Name()), 2).Status))
}

// Hangs in C: the regex engine checks for signals, so it is interrupted; code that does not
// stop on SIGINT is killed after the grace and the interpreter restarted from the latest
// snapshot, in the same container. Either way: status timeout, earlier variables intact.
func TestTimeoutKillsCodeThatDoesNotStop(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		killed     bool
	}{
		{"catastrophic regex", "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')", false},
		{"SIGINT ignored", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", true},
		{"C sleep with SIGINT blocked", "import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nctypes.CDLL(None).sleep(100)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{})
			require.Equal(t, "ok", string(run(t, s, "kept = 41").Status))
			before := startedAt(t, c, s.Name())

			r := execWith(t, s, "lost = 1\n"+tc.code, session.ExecOptions{Timeout: time.Second})
			assert.Equal(t, "timeout", string(r.Status), r.Stderr)
			assert.NotEmpty(t, r.Message)
			require.NotNil(t, r.State)
			if tc.killed {
				assert.Equal(t, "restored", string(r.State.Status))
				assert.Contains(t, r.Message, "did not stop")
				require.NotNil(t, r.State.RestoredTo)
				assert.Equal(t, int64(1), *r.State.RestoredTo)
			} else {
				assert.NotEqual(t, "restored", string(r.State.Status), "interrupted, not killed")
			}

			r = run(t, s, "kept + 1")
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assert.Equal(t, "42", *r.Result, "earlier variables are intact")
			assert.Equal(t, before, startedAt(t, c, s.Name()), "the interpreter was restarted inside the same container")
		})
	}
}

func TestInterruptFromAnotherConnection(t *testing.T) {
	for _, tc := range []struct{ lang, set, sleep, check, want string }{
		{"python", "kept = 5", "import time\nprint('started', flush=True)\ntime.sleep(60)", "kept", "5"},
		{"bash", "kept=5", "echo started; sleep 60; echo not-reached", "echo $kept", "5\n"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{Lang: tc.lang})
			require.Equal(t, "ok", string(run(t, s, tc.set).Status))

			onOut, started := startedSignal()
			done := make(chan *session.Result, 1)
			go func() {
				r, err := s.Exec(context.Background(), tc.sleep, session.ExecOptions{Stdout: onOut})
				if err != nil {
					t.Error(err)
				}
				done <- r
			}()
			waitClosed(t, started, "the code to start")

			other, _, err := c.Open(testenv.Ctx(t, time.Minute), s.Name())
			require.NoError(t, err)
			defer other.Close()
			ok, err := other.Interrupt(testenv.Ctx(t, time.Minute))
			require.NoError(t, err)
			assert.True(t, ok, "an execution was running")

			var r *session.Result
			select {
			case r = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the interrupted execution did not return")
			}
			require.NotNil(t, r)
			assert.Equal(t, "interrupted", string(r.Status), r.Stderr)
			assert.NotContains(t, r.Stdout, "not-reached")
			if tc.lang == "python" {
				require.NotNil(t, r.Error)
				assert.Equal(t, "KeyboardInterrupt", r.Error.Name)
			}

			r = run(t, s, tc.check)
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assertShows(t, tc.lang, tc.want, r)
		})
	}
}

// --- resource bombs ----------------------------------------------------------------------------

func TestMemoryBombIsOutOfMemory(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Memory: 256 << 20})
	require.Equal(t, "ok", string(run(t, s, "kept = 7").Status))
	before := startedAt(t, c, s.Name())

	r := execWith(t, s, "hog = b'x' * (2 ** 30)", session.ExecOptions{})
	assert.Equal(t, "crashed", string(r.Status))
	assert.Contains(t, r.Message, "out of memory")
	require.NotNil(t, r.State)
	assert.Equal(t, "restored", string(r.State.Status))

	r = run(t, s, "(kept, 'hog' in dir())")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(7, False)", *r.Result, "the state before the bomb is back")
	assert.Equal(t, before, startedAt(t, c, s.Name()), "the same container")
	e := execBySeq(t, historyOf(t, c, s.Name()), 2)
	assert.Equal(t, "crashed", string(e.Status))
}

// --- the interpreter dies ----------------------------------------------------------------------

func TestInterpreterDeathRestartsItInTheSameContainer(t *testing.T) {
	for _, tc := range []struct {
		name, lang, set, die, check, want, says string
	}{
		{"os._exit", "python", "kept = 3", "import os\nos._exit(3)", "kept", "3", "exit code 3"},
		{"segfault", "python", "kept = 3", "import ctypes\nctypes.string_at(0)", "kept", "3", "signal 11"},
		{"bash exit", "bash", "kept=3", "exit 7", "echo $kept", "3\n", "exit code 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{Lang: tc.lang})
			require.Equal(t, "ok", string(run(t, s, tc.set).Status))
			before := startedAt(t, c, s.Name())

			r := execWith(t, s, tc.die, session.ExecOptions{})
			assert.Equal(t, "crashed", string(r.Status))
			assert.Contains(t, r.Message, tc.says)
			require.NotNil(t, r.State)
			assert.Equal(t, "restored", string(r.State.Status))
			require.NotNil(t, r.State.RestoredTo)
			assert.Equal(t, int64(1), *r.State.RestoredTo, "the latest snapshot")
			assert.NotContains(t, r.Stderr, "[runtimectl:", "the reason rides in the result (the CLI prints it), not in the output")

			r = run(t, s, tc.check)
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assertShows(t, tc.lang, tc.want, r)
			assert.Equal(t, before, startedAt(t, c, s.Name()), "restarted inside the same container")
			assert.Equal(t, "crashed", string(execBySeq(t, historyOf(t, c, s.Name()), 2).Status))
		})
	}
}

func TestSysExitIsAnOrdinaryError(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	run(t, s, "kept = 1")
	r := run(t, s, "import sys\nsys.exit(4)")
	assert.Equal(t, "error", string(r.Status))
	require.NotNil(t, r.Error)
	assert.Equal(t, "SystemExit", r.Error.Name)
	r = run(t, s, "import sys\nsys.exit()")
	assert.Equal(t, "error", string(r.Status))
	r = run(t, s, "exit()")
	assert.Equal(t, "error", string(r.Status))
	r = run(t, s, "kept")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "1", *r.Result)
}

// --- output ------------------------------------------------------------------------------------

// agentPeakRSS is the agent's peak resident memory in KiB, read by the session's own code.
const agentPeakRSS = `import os
def _hwm():
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            cmd = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\0')
        except OSError:
            continue
        if cmd[0].endswith(b'runtime-agent') and cmd[1:2] == [b'serve']:
            for line in open('/proc/%s/status' % p):
                if line.startswith('VmHWM:'):
                    return int(line.split()[1])
_hwm()`

func TestOutputFloodIsCapped(t *testing.T) {
	t.Run("python print of 1 GB", func(t *testing.T) {
		c := testenv.Client(t)
		s := testenv.Start(t, c, session.Spec{Memory: 4 << 30})
		var streamed int64
		r := execWith(t, s, "print('x' * 10**9)\n'done'", session.ExecOptions{Stdout: testenv.WriterFunc(func(p []byte) { streamed += int64(len(p)) })})
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Equal(t, "'done'", *r.Result)
		checkCapped(t, r, 4<<20, streamed)
		assert.Greater(t, r.StdoutTruncated, int64(900_000_000))

		r = run(t, s, agentPeakRSS)
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		var kib int64
		_, err := fmt.Sscan(*r.Result, &kib)
		require.NoError(t, err, *r.Result)
		assert.Less(t, kib, int64(100<<10), "the agent's memory stays bounded (peak %d KiB)", kib)

		checkLogsAndHistorySmall(t, c, s.Name(), 2)
	})
	t.Run("bash yes", func(t *testing.T) {
		c := testenv.Client(t)
		s := testenv.Start(t, c, session.Spec{Lang: "bash"})
		var streamed int64
		r := execWith(t, s, "yes", session.ExecOptions{Timeout: 2 * time.Second, MaxOutput: 1 << 20,
			Stdout: testenv.WriterFunc(func(p []byte) { streamed += int64(len(p)) })})
		assert.Equal(t, "timeout", string(r.Status))
		checkCapped(t, r, 1<<20, streamed)
		assert.Positive(t, r.StdoutTruncated)
		r = run(t, s, "echo still here")
		assert.Equal(t, "still here\n", r.Stdout)
		checkLogsAndHistorySmall(t, c, s.Name(), 2)
	})
}

func checkCapped(t *testing.T, r *session.Result, limit int, streamed int64) {
	t.Helper()
	i := strings.Index(r.Stdout, "\n[runtimectl: output capped")
	require.GreaterOrEqual(t, i, 0, "the cap is marked")
	assert.Equal(t, limit, i, "delivered up to the cap, then the mark")
	assert.Less(t, len(r.Stdout), limit+1024, "and nothing after the mark")
	assert.Equal(t, int64(len(r.Stdout)), streamed, "what was streamed is what the result holds")
}

// checkLogsAndHistorySmall: the container's log (what docker logs keeps) and the history on the
// volume stay small whatever the code printed.
func checkLogsAndHistorySmall(t *testing.T, c *session.Client, name string, n int) {
	t.Helper()
	logs, err := docker.From(c).Containers().Logs(testenv.Ctx(t, time.Minute), name, 1<<20)
	require.NoError(t, err)
	assert.Less(t, len(logs), 64<<10, "docker logs of the container stay small")
	st, err := docker.From(c).Containers().Stat(testenv.Ctx(t, time.Minute), name, session.StateDir+"/history.jsonl")
	require.NoError(t, err)
	require.True(t, st.Exists)
	assert.Less(t, st.Size, int64(4<<20), "the history keeps a bounded head and tail")
	assert.Len(t, historyOf(t, c, name), n)
}

func TestRawBytesAreDeliveredAsWritten(t *testing.T) {
	// Invalid UTF-8, NUL, \r, and a euro sign split across two writes.
	const pyCode = `import os, sys, time
os.write(1, b'bad \xff\xfe nul \x00 cr \r end\n')
os.write(1, b'\xe2\x82')
time.sleep(0.2)
os.write(1, b'\xac\n')
os.write(2, b'err \xc3\x28 \x00\n')
pass`
	const wantOut = "bad \xff\xfe nul \x00 cr \r end\n\xe2\x82\xac\n"
	const wantErr = "err \xc3\x28 \x00\n"
	const bashCode = `printf 'bad \xff\xfe nul \x00 cr \r end\n'; printf '\xe2\x82'; sleep 0.2; printf '\xac\n'; printf 'err \xc3\x28 \x00\n' >&2`

	for _, tc := range []struct{ lang, code string }{{"python", pyCode}, {"bash", bashCode}} {
		t.Run(tc.lang, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{Lang: tc.lang})
			var streamed, streamedErr []byte
			r := execWith(t, s, tc.code, session.ExecOptions{
				Stdout: testenv.WriterFunc(func(p []byte) { streamed = append(streamed, p...) }),
				Stderr: testenv.WriterFunc(func(p []byte) { streamedErr = append(streamedErr, p...) }),
			})
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assert.Equal(t, []byte(wantOut), []byte(r.Stdout), "raw bytes, as written")
			assert.Equal(t, []byte(wantOut), streamed)
			assert.Equal(t, []byte(wantErr), []byte(r.Stderr))
			assert.Equal(t, []byte(wantErr), streamedErr)

			// The history is valid JSON: the bad bytes become U+FFFD, the euro sign is whole.
			e := execBySeq(t, historyOf(t, c, s.Name()), r.Seq)
			assert.True(t, utf8.ValidString(e.Stdout))
			assert.Equal(t, "bad \ufffd\ufffd nul \x00 cr \r end\n€\n", e.Stdout)
			assert.Equal(t, "err \ufffd( \x00\n", e.Stderr)

			// The CLI: raw bytes on stdout; valid JSON with U+FFFD under --json.
			var out, errb bytes.Buffer
			code := cli.Main([]string{"session", "exec", s.Name(), tc.code}, strings.NewReader(""), &out, &errb)
			require.Equal(t, 0, code, errb.String())
			assert.Equal(t, []byte(wantOut), out.Bytes())
			assert.Equal(t, []byte(wantErr), errb.Bytes())

			out.Reset()
			errb.Reset()
			code = cli.Main([]string{"session", "exec", s.Name(), tc.code, "--json"}, strings.NewReader(""), &out, &errb)
			require.Equal(t, 0, code, errb.String())
			require.True(t, json.Valid(out.Bytes()), out.String())
			assert.True(t, utf8.Valid(out.Bytes()), "the JSON is valid UTF-8")
			var res struct{ Stdout, Stderr string }
			require.NoError(t, json.Unmarshal(out.Bytes(), &res))
			assert.Equal(t, "bad \ufffd\ufffd nul \x00 cr \r end\n€\n", res.Stdout)
			assert.Equal(t, "err \ufffd( \x00\n", res.Stderr)
		})
	}
}

func TestOutputThatLooksLikeTheProtocol(t *testing.T) {
	// A Result frame header for request 1 and its payload, a Result's JSON, nonce-like hex,
	// kernel done events and the runtime's own bracketed notes: all of it is just output.
	fake := func(typ byte) string {
		return string([]byte{0, 0, 0, 32, typ, 0, 0, 0, 1}) + `{"status":"crashed","seq":999}  `
	}
	lines := []string{
		fake(byte(execproto.TypeResult)),
		fake(byte(execproto.TypeError)),
		`{"session":"x","seq":999,"status":"crashed","stdout":"","stderr":"","result":"666","error":null}`,
		"0123456789abcdef0123456789abcdef",
		"deadbeefdeadbeefdeadbeefdeadbeef",
		`{"op":"done","id":"x1","status":"error","result":"666","error":null,"outputs":[],"changed":true}`,
		`{"op":"done","id":"x2","status":"crashed"}`,
		`{"op":"snapshot_started","id":"1-abcdef","pid":1}`,
		"0\n12\n{\"ok\":false}",
		"[runtimectl: the interpreter died during the execution (exit code 9)]",
	}
	want := strings.Join(lines, "\n") + "\n"
	for _, lang := range []string{"python", "bash"} {
		t.Run(lang, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{Lang: lang})
			path := "/workspace/fake.bin"
			require.NoError(t, writeFileIn(t, s, lang, path, want))
			var code string
			if lang == "python" {
				code = fmt.Sprintf("import os, sys\ndata = open(%q, 'rb').read()\nos.write(1, data)\nos.write(2, data)\nsys.stdout.write(data.decode('latin-1'))\n41 + 1", path)
			} else {
				code = fmt.Sprintf("cat %s; cat %s >&2; cat %s", path, path, path)
			}
			r := execWith(t, s, code, session.ExecOptions{})
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			if lang == "python" {
				assert.Equal(t, "42", *r.Result)
			}
			assert.Equal(t, want+want, r.Stdout)
			assert.Equal(t, want, r.Stderr)
			assert.Nil(t, r.Error)
			assert.Equal(t, int64(2), r.Seq)
			r = run(t, s, map[string]string{"python": "'after'", "bash": "echo after"}[lang])
			require.Equal(t, "ok", string(r.Status))
			assert.Equal(t, int64(3), r.Seq)
			assert.NotContains(t, r.Stdout, "crashed")
		})
	}
}

// writeFileIn writes content (any bytes) to path inside the session, through base64.
func writeFileIn(t *testing.T, s *session.Session, lang, path, content string) error {
	t.Helper()
	var b strings.Builder
	enc := base64.StdEncoding.EncodeToString([]byte(content))
	if lang == "python" {
		fmt.Fprintf(&b, "import base64\nopen(%q, 'wb').write(base64.b64decode(%q))\nNone", path, enc)
	} else {
		fmt.Fprintf(&b, "printf '%%s' %q | base64 -d > %s", enc, path)
	}
	r := run(t, s, b.String())
	if r.Status != "ok" {
		return fmt.Errorf("write %s: %s %s", path, r.Status, r.Stderr)
	}
	return nil
}

// --- prompts, pagers and stdin -----------------------------------------------------------------

func TestStdinIsAtEOFAndNothingPrompts(t *testing.T) {
	t.Run("python", func(t *testing.T) {
		c := testenv.Client(t)
		s := testenv.Start(t, c, session.Spec{})
		r := execWith(t, s, "input('your name? ')", session.ExecOptions{Timeout: 30 * time.Second})
		assert.Equal(t, "error", string(r.Status), "not a timeout: stdin is at EOF at once")
		require.NotNil(t, r.Error)
		assert.Equal(t, "EOFError", r.Error.Name)

		r = execWith(t, s, "import getpass\ngetpass.getpass('password: ')", session.ExecOptions{Timeout: 30 * time.Second})
		assert.Equal(t, "error", string(r.Status))
		require.NotNil(t, r.Error)
		assert.Equal(t, "EOFError", r.Error.Name)

		r = execWith(t, s, "import sys\n(sys.stdin.read(), sys.stdin.isatty(), sys.stdout.isatty())", session.ExecOptions{Timeout: 30 * time.Second})
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Equal(t, "('', False, False)", *r.Result)

		r = execWith(t, s, "help(len)", session.ExecOptions{Timeout: 30 * time.Second})
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Contains(t, r.Stdout, "len(obj", "the pager printed the text and did not wait")

		r = run(t, s, "import os, subprocess\n(os.environ.get('PAGER'), os.environ.get('GIT_TERMINAL_PROMPT'), os.environ.get('DEBIAN_FRONTEND'), subprocess.run(['sh', '-c', 'echo $PAGER $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND'], capture_output=True, text=True).stdout)")
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Equal(t, `('cat', '0', 'noninteractive', 'cat 0 noninteractive\n')`, *r.Result)
	})
	t.Run("bash", func(t *testing.T) {
		c := testenv.Client(t)
		s := testenv.Start(t, c, session.Spec{Lang: "bash"})
		r := execWith(t, s, "read -p 'name? ' name; echo \"rc=$?\"; cat; echo \"cat=$?\"", session.ExecOptions{Timeout: 30 * time.Second})
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Equal(t, "rc=1\ncat=0\n", r.Stdout)
		r = run(t, s, "echo $PAGER $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND; [ -t 0 ] || echo no-tty")
		assert.Equal(t, "cat 0 noninteractive\nno-tty\n", r.Stdout)
	})
}

// --- background processes ----------------------------------------------------------------------

// sleepers counts the session's live `sleep 1e9` processes.
const pySleepers = `import os
def _sleepers():
    n = 0
    for p in os.listdir('/proc'):
        try:
            if p.isdigit() and open('/proc/%s/cmdline' % p, 'rb').read().split(b'\0')[:2] == [b'sleep', b'1e9']:
                n += 1
        except OSError:
            pass
    return n
_sleepers()`

const bashSleepers = `n=0; for f in /proc/[0-9]*/cmdline; do mapfile -d '' a < "$f" 2>/dev/null; [[ ${a[0]-} == sleep && ${a[1]-} == 1e9 ]] && n=$((n+1)); done; echo "sleepers=$n"`

func TestBackgroundProcessDoesNotHoldTheExecution(t *testing.T) {
	for _, tc := range []struct{ lang, start, count, die, want0, want1 string }{
		{"python", "import subprocess\np = subprocess.Popen(['sleep', '1e9'])\nq = subprocess.Popen(['sleep', '1e9'], start_new_session=True)\nprint('started')",
			pySleepers, "import os\nos._exit(1)", "0", "2"},
		{"bash", "nohup sleep 1e9 & setsid sleep 1e9 & echo started",
			bashSleepers, "exit 1", "sleepers=0\n", "sleepers=2\n"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{Lang: tc.lang})
			// The code returns at once: the execution must not wait for its children (a
			// timeout status would say it did).
			r := execWith(t, s, tc.start, session.ExecOptions{Timeout: 30 * time.Second})
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assert.Contains(t, r.Stdout, "started")
			assert.Equal(t, tc.want1, countUntil(t, s, tc.count, tc.want1), "both children run in the background")

			// A restart of the interpreter ends every process it left behind, in its process
			// group or not.
			r = execWith(t, s, tc.die, session.ExecOptions{})
			require.Equal(t, "crashed", string(r.Status))
			assert.Equal(t, tc.want0, countUntil(t, s, tc.count, tc.want0), "the children were killed with the interpreter")
		})
	}
}

// countUntil runs code until its output (or result) is want, for a few seconds (processes take
// a moment to start or to be reaped); it returns the last output.
func countUntil(t *testing.T, s *session.Session, code, want string) string {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := execWith(t, s, code, session.ExecOptions{Timeout: 30 * time.Second})
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		got = r.Stdout
		if r.Result != nil {
			got = *r.Result
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// --- the container or the controller dies -------------------------------------------------------
