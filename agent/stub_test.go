package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/lang"
)

// The stub kernel driver: this test binary, started again by the agent as its kernel with
// STUB_KERNEL=1, speaks the kernel protocol (docs/kernel-protocol.md) over the real pipes. Its
// whole state is one string; what an execution does is said by its code:
//
//	set X            the state becomes X                       (done ok, changed)
//	get              prints the state on stdout                (done ok, unchanged)
//	noop             nothing                                   (done ok, unchanged)
//	show             nothing but its bookkeeping (IPython's Out)  (done ok, unchanged, bookkeeping)
//	mutate-fail X    the state becomes X, then it "raises"     (done error, changed)
//	error-event      answers with an error event, no done      (as Node does when its handler throws)
//	message-event    the same with bash's field name "message"
//	die              exits with code 3 in the middle
//	sleep            waits for SIGINT, then ends interrupted   (the timeout and interrupt tests)
//	hang             ignores SIGINT and never answers          (killed after the grace)
//	close-events     closes its event pipe and stays alive     (a driver that stops answering)
//	nonce-no-done    ends the output but never says done
//	garbage          writes a line that is not JSON on the event pipe, and no done
//	die-later        done, then exits with code 4 a moment later    (between executions)
//	garbage-later    done, then a line that is not JSON a moment later
//	close-later      done, then closes its event pipe a moment later and stays alive
//	fill             writes 2 MiB to ./fill in its working directory
//	free             removes ./fill
//
// A state of "fail-snapshot" makes snapshots fail, "slow-snapshot" makes the driver hang in
// its snapshot, "vars-hang" keeps it from answering a variables request; a snapshot holding
// "crash-on-load" kills the driver when it is restored, and one holding "with-copies" says in
// its ready event that a name came back as a copy. A file ./no-start in its working
// directory keeps every driver from starting (exit 11), as a pids limit still reached does.
func TestMain(m *testing.M) {
	if os.Getenv("STUB_KERNEL") == "1" {
		stubKernel()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func stubKernel() {
	signal.Ignore(syscall.SIGINT)
	ctrl := bufio.NewReader(os.NewFile(3, "ctrl"))
	events := os.NewFile(4, "events")
	snap := os.NewFile(5, "snap")
	emit := func(v map[string]any) {
		b, _ := json.Marshal(v)
		_, _ = events.Write(append(b, '\n'))
	}
	if _, err := os.Stat("no-start"); err == nil {
		os.Exit(11)
	}
	state := ""
	ready := map[string]any{"op": "ready", "pid": os.Getpid(), "restored": []string{}, "failed": []any{}}
	if os.Getenv("RUNTIMECTL_RESTORE_FD") == "6" {
		b, _ := io.ReadAll(os.NewFile(6, "restore"))
		state = string(b)
		if state == "crash-on-load" {
			os.Exit(9)
		}
		ready["restored"] = []string{"state"}
		if state == "with-copies" {
			ready["copies"] = []any{map[string]string{"name": "v", "type": "numpy.ndarray", "reason": "a view of a numpy.memmap: came back as a copy"}}
		}
	}
	emit(ready)
	for {
		line, err := ctrl.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			Op, ID, Code, Nonce, Sync string
		}
		if json.Unmarshal(line, &req) != nil {
			emit(map[string]any{"op": "error", "id": nil, "error": "malformed request"})
			continue
		}
		switch req.Op {
		case "snapshot":
			emit(map[string]any{"op": "snapshot_started", "id": req.ID, "pid": os.Getpid()})
			if state == "slow-snapshot" {
				select {} // the writer (the driver itself) hangs
			}
			m := map[string]any{"id": req.ID, "ok": true, "format": "stub", "kept": []string{"state"}, "skipped": []any{}}
			data := state
			if state == "fail-snapshot" {
				m["ok"], m["error"], data = false, "the stub cannot save this", ""
			}
			mb, _ := json.Marshal(m)
			var b strings.Builder
			if data != "" {
				fmt.Fprintf(&b, "%d\n%s", len(data), data)
			}
			fmt.Fprintf(&b, "0\n%d\n%s", len(mb), mb)
			_, _ = snap.Write([]byte(b.String()))
		case "vars":
			if state == "vars-hang" {
				continue
			}
			emit(map[string]any{"op": "vars", "id": req.ID, "vars": []any{map[string]any{"name": "state", "type": "str", "size": len(state), "preview": state}}, "modules": []string{}})
		case "exec":
			verb, arg, _ := strings.Cut(req.Code, " ")
			status, changed, book := "ok", true, false
			var errv any
			end := func() {
				_, _ = os.Stdout.WriteString(req.Nonce)
				_, _ = os.Stderr.WriteString(req.Nonce)
				emit(map[string]any{"op": "done", "id": req.ID, "status": status, "result": nil, "error": errv, "outputs": []any{}, "changed": changed, "bookkeeping": book})
			}
			switch verb {
			case "set":
				state = arg
			case "get":
				fmt.Print(state)
				changed = false
			case "noop":
				changed = false
			case "show":
				changed, book = false, true
			case "mutate-fail":
				state = arg
				status, errv = "error", map[string]string{"name": "ValueError", "value": "after the mutation", "traceback": ""}
			case "error-event":
				emit(map[string]any{"op": "error", "id": req.ID, "error": "internal error: the handler threw"})
				continue
			case "message-event":
				emit(map[string]any{"op": "error", "id": req.ID, "message": "internal error: bash said it this way"})
				continue
			case "die":
				fmt.Print("partial output")
				os.Exit(3)
			case "sleep":
				c := make(chan os.Signal, 1)
				signal.Notify(c, syscall.SIGINT)
				<-c
				signal.Reset(syscall.SIGINT)
				signal.Ignore(syscall.SIGINT)
				status, changed = "interrupted", true
				errv = map[string]string{"name": "KeyboardInterrupt", "value": "", "traceback": ""}
			case "hang":
				select {}
			case "display":
				// a, display 1 (tokens first, as drivers do), b, display 2 (its event before its
				// tokens: the gate holds it), c on stdout; x on stderr between the two
				show := func(n int, text string) {
					emit(map[string]any{"op": "display", "id": req.ID, "n": n, "kind": "display_data",
						"data": map[string]any{"text/plain": text, "image/png": "iVBORw0KGgo="}, "metadata": map[string]any{}})
				}
				fmt.Print("a")
				_, _ = os.Stdout.WriteString(req.Sync)
				_, _ = os.Stderr.WriteString(req.Sync)
				show(1, "one")
				fmt.Print("b")
				fmt.Fprint(os.Stderr, "x")
				show(2, "two")
				time.Sleep(20 * time.Millisecond)
				_, _ = os.Stdout.WriteString(req.Sync)
				_, _ = os.Stderr.WriteString(req.Sync)
				fmt.Print("c")
				changed = false
			case "fill":
				_ = os.WriteFile("fill", make([]byte, 2<<20), 0o644)
			case "free":
				_ = os.Remove("fill")
			case "die-later", "garbage-later", "close-later":
				go func() {
					time.Sleep(100 * time.Millisecond)
					switch verb {
					case "die-later":
						os.Exit(4)
					case "garbage-later":
						_, _ = events.Write([]byte("this is not JSON either\n"))
					case "close-later":
						events.Close()
					}
				}()
				changed = false
			case "close-events":
				events.Close()
				select {}
			case "nonce-no-done":
				_, _ = os.Stdout.WriteString(req.Nonce)
				_, _ = os.Stderr.WriteString(req.Nonce)
				continue
			case "garbage":
				_, _ = events.Write([]byte("this is not JSON\n"))
				continue
			}
			end()
		default:
			emit(map[string]any{"op": "error", "id": req.ID, "error": "unknown op " + req.Op})
		}
	}
}

// stubAgent is an agent serving one session whose kernel is the stub driver, in a temporary
// state directory, with its run loop going until the test ends.
type stubAgent struct {
	*Agent
	cfg    Config
	cancel context.CancelFunc
	ran    chan struct{}
}

func stubConfig(t *testing.T) Config {
	t.Setenv("STUB_KERNEL", "1")
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	return Config{
		Session:  "stub",
		Lang:     lang.Lang{Name: "stub", Kernel: []string{exe}},
		StateDir: filepath.Join(dir, "state"),
		Workdir:  dir,
		Socket:   filepath.Join(dir, "agent.sock"),
		UID:      -1,
		Grace:    300 * time.Millisecond,
	}
}

// startStub starts an agent with cfg (see stubConfig) and registers its end.
func startStub(t *testing.T, cfg Config) *stubAgent {
	t.Helper()
	a, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &stubAgent{Agent: a, cfg: cfg, cancel: cancel, ran: make(chan struct{})}
	go func() {
		a.Run(ctx)
		close(s.ran)
	}()
	t.Cleanup(s.stop)
	return s
}

// stop ends the run loop (which drains the snapshot in flight) and waits for it.
func (s *stubAgent) stop() {
	s.cancel()
	<-s.ran
}

// client connects a protocol client to the agent in-process, over a pipe.
func (s *stubAgent) client(t *testing.T) *execproto.Client {
	t.Helper()
	srv, cli := net.Pipe()
	go s.serveConn(srv)
	c, err := execproto.NewClient(testCtx(t, 10*time.Second), cli)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// exec runs code and returns its result with the streamed output filled in.
func execStub(t *testing.T, c *execproto.Client, code string, timeout time.Duration) *execproto.Result {
	t.Helper()
	var out, errs []byte
	res, err := c.Exec(testCtx(t, 30*time.Second), execproto.Request{Code: code, TimeoutMs: timeout.Milliseconds()},
		execproto.Handlers{Stdout: func(p []byte) { out = append(out, p...) }, Stderr: func(p []byte) { errs = append(errs, p...) }}, nil)
	require.NoError(t, err, "exec %q", code)
	res.Stdout, res.Stderr = string(out), string(errs)
	return res
}
