package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
)

// kernelEvent is one JSON line that a driver writes on fd 4 (see docs/kernel-protocol.md).
type kernelEvent struct {
	Op      driverOp           `json:"op"`
	ID      string             `json:"id"`
	PID     int                `json:"pid"`
	Status  contract.Status    `json:"status"`
	Result  *string            `json:"result"`
	Error   json.RawMessage    `json:"error"` // an object in done events, a string in error events
	Outputs []execproto.Output `json:"outputs"`
	Changed *bool              `json:"changed"`
	// Fingerprint (done): the driver wrote its state's fingerprint on the state file; the agent
	// compares it with the last one to decide "changed". FingerprintIgnore (ready): the keys of
	// the lines of its first part that the comparison leaves out (see fingerprint.go).
	Fingerprint       bool     `json:"fingerprint"`
	FingerprintIgnore []string `json:"fingerprint_ignore"`
	// Bookkeeping (with changed false) says the interpreter's own bookkeeping changed (IPython's
	// In, Out, _): no snapshot now, but a drain takes one.
	Bookkeeping bool                `json:"bookkeeping"`
	Restored    []string            `json:"restored"`
	Failed      []execproto.Skipped `json:"failed"`
	Copies      []execproto.Skipped `json:"copies"`
	Info        map[string]string   `json:"info"`
	Message     string              `json:"message"`
	// display events
	N         int                        `json:"n"`
	Kind      execproto.DisplayKind      `json:"kind"`
	Data      map[string]json.RawMessage `json:"data"`
	Metadata  json.RawMessage            `json:"metadata"`
	DisplayID string                     `json:"display_id"`
	Wait      bool                       `json:"wait"`
	raw       []byte
}

// execError returns the error of a done event: what the code raised, or nil.
func (ev *kernelEvent) execError() *execproto.Error {
	if len(ev.Error) == 0 || string(ev.Error) == "null" {
		return nil
	}
	var e execproto.Error
	if err := json.Unmarshal(ev.Error, &e); err != nil {
		return &execproto.Error{Name: "DriverError", Value: ev.errorText()}
	}
	return &e
}

// errorText returns the message of an error event, whichever field the driver put it in
// (bash spells it "message", the others "error").
func (ev *kernelEvent) errorText() string {
	var s string
	if len(ev.Error) > 0 && json.Unmarshal(ev.Error, &s) == nil && s != "" {
		return s
	}
	if ev.Message != "" {
		return ev.Message
	}
	if len(ev.Error) > 0 && string(ev.Error) != "null" {
		return string(ev.Error)
	}
	return "the driver reported an error without a message"
}

// kernel is one running interpreter process and the agent's ends of its pipes.
type kernel struct {
	cmd     *exec.Cmd
	pid     int
	uid     int      // the session user, whose processes all end with the kernel (see killUser)
	ctrl    *os.File // fd 3 of the kernel: requests
	events  chan kernelEvent
	stdout  outStream
	stderr  outStream
	snap    *os.File // fd 5 of the kernel: snapshot data
	snapBuf *bufio.Reader
	fp      *fingerprints // the state fingerprint file, for a driver that writes one (nil otherwise)
	reading atomic.Bool   // the snapshot reader is inside a stream
	exited  chan struct{}
	waitErr error
	ready   kernelEvent

	// Seen by the run loop: when the event pipe closed (zero while open), and that the exit
	// was handled.
	closedAt time.Time
	exitSeen bool
}

// eventsClosed reports whether the run loop saw the kernel's event pipe close.
func (k *kernel) eventsClosed() bool { return !k.closedAt.IsZero() }

// startKernel starts the driver as the session user in its own process group, restoring from
// restore when it is not nil, and waits for its ready event.
func startKernel(cfg Config, restore *os.File, readyTimeout time.Duration) (*kernel, error) {
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	snapR, snapW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	childEnds := []*os.File{ctrlR, evW, snapW, outW, errW, null}
	closeChildEnds := func() {
		for _, f := range childEnds {
			f.Close()
		}
	}

	cmd := exec.Command(cfg.Lang.Kernel[0], cfg.Lang.Kernel[1:]...)
	cmd.Dir = cfg.Workdir
	cmd.Stdin = null
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{ctrlR, evW, snapW}
	env := kernelEnv(cfg)
	if restore != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, restore)
		env = append(env, "RUNTIMECTL_RESTORE_FD=6")
	}
	// The preload is handed over on a pipe that the driver reads and closes, not in the
	// environment (which /proc/PID/environ shows for the interpreter's whole life).
	if cfg.Preload != "" {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeChildEnds()
			return nil, err
		}
		childEnds = append(childEnds, pr)
		env = append(env, fmt.Sprintf("RUNTIMECTL_PRELOAD_FD=%d", 3+len(cmd.ExtraFiles)))
		cmd.ExtraFiles = append(cmd.ExtraFiles, pr)
		go func() {
			_, _ = io.WriteString(pw, cfg.Preload)
			pw.Close()
		}()
	}
	var fp *fingerprints
	if cfg.Lang.Fingerprint {
		// Without the file (no memfd here) the driver decides "changed" itself.
		if fp, err = newFingerprints(); err == nil {
			env = append(env, fmt.Sprintf("RUNTIMECTL_STATE_FD=%d", 3+len(cmd.ExtraFiles)))
			cmd.ExtraFiles = append(cmd.ExtraFiles, fp.f)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cfg.UID >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		closeChildEnds()
		fp.close()
		for _, f := range []*os.File{ctrlW, evR, snapR, outR, errR} {
			f.Close()
		}
		return nil, fmt.Errorf("start kernel %s: %w", strings.Join(cfg.Lang.Kernel, " "), err)
	}
	closeChildEnds()

	k := &kernel{
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		uid:     cfg.UID,
		ctrl:    ctrlW,
		events:  make(chan kernelEvent, 16),
		snap:    snapR,
		snapBuf: bufio.NewReaderSize(snapR, 1<<20),
		fp:      fp,
		exited:  make(chan struct{}),
	}
	go k.stdout.run(outR)
	go k.stderr.run(errR)
	go k.readEvents(evR)
	go func() {
		k.waitErr = cmd.Wait()
		// What the interpreter wrote before it ended is still in the pipes: let the readers take
		// it, without waiting on processes that it left holding the pipes' write ends.
		stop := time.Now().Add(200 * time.Millisecond)
		_ = outR.SetReadDeadline(stop)
		_ = errR.SetReadDeadline(stop)
		close(k.exited)
	}()

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-k.events:
			if !ok {
				<-k.exited
				return nil, fmt.Errorf("kernel exited while starting: %s", k.exitText())
			}
			if ev.Op == opReady {
				k.ready = ev
				k.fp.start(ev)
				return k, nil
			}
		case <-timer.C:
			k.kill()
			return nil, fmt.Errorf("kernel did not become ready within %s", readyTimeout)
		}
	}
}

func kernelEnv(cfg Config) []string {
	var env []string
	for _, kv := range os.Environ() {
		// RUNTIMECTL_IPYTHON=0 (a session's --env) is the driver's: plain Python, no IPython.
		if strings.HasPrefix(kv, "RUNTIMECTL_") && !strings.HasPrefix(kv, "RUNTIMECTL_IPYTHON=") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"HOME="+cfg.Workdir,
		"USER=user",
		"RUNTIMECTL_LANG="+cfg.Lang.Name,
		"RUNTIMECTL_OUTPUTS="+cfg.Workdir+"/outputs",
		"RUNTIMECTL_SESSION="+cfg.Session,
	)
	return append(env, cfg.KernelEnv...) // later entries win (os/exec keeps the last of a key)
}

func (k *kernel) readEvents(r *os.File) {
	defer close(k.events)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev kernelEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			// A driver bug: said to whoever waits for the driver, which treats it as a crash.
			ev = kernelEvent{Op: opInvalid, Message: fmt.Sprintf("a line on its event pipe is not a JSON event (%v): %.200q", err, line)}
		}
		ev.raw = append([]byte(nil), line...)
		k.events <- ev
	}
}

// send writes one request line on the kernel's fd 3.
func (k *kernel) send(req driverRequest) error {
	b, err := encodeRequest(req)
	if err != nil {
		return err
	}
	_, err = k.ctrl.Write(b)
	return err
}

// signal sends sig to the kernel's whole process group: the interpreter and whatever the
// code started in the foreground or background (snapshot writers have their own group).
func (k *kernel) signal(sig syscall.Signal) {
	_ = syscall.Kill(-k.pid, sig)
}

func (k *kernel) alive() bool {
	select {
	case <-k.exited:
		return false
	default:
		return true
	}
}

// kill ends the interpreter and every process of the session user (what the code left running
// in the background, in its process group or not), and waits for the interpreter to be reaped.
// A snapshot writer is such a process too: callers wait for it first.
func (k *kernel) kill() {
	k.signal(syscall.SIGKILL)
	killUser(k.uid)
	select {
	case <-k.exited:
	case <-time.After(5 * time.Second):
	}
	k.ctrl.Close()
	k.snap.Close()
	k.fp.close()
}

// exitText says how the interpreter ended, for a person: "exit code 3", "killed by signal 11
// (segmentation fault)".
func (k *kernel) exitText() string {
	var ee *exec.ExitError
	if errors.As(k.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("exit code %d", ee.ExitCode())
	}
	if k.waitErr != nil {
		return k.waitErr.Error()
	}
	return "exit code 0"
}

// killedBy reports whether the interpreter was killed by sig.
func (k *kernel) killedBy(sig syscall.Signal) bool {
	var ee *exec.ExitError
	if errors.As(k.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return ws.Signaled() && ws.Signal() == sig
		}
	}
	return false
}

// oomKills reads the container cgroup's count of out-of-memory kills (cgroup v2, then v1).
func oomKills() int64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.events"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var n int64
			if _, err := fmt.Sscanf(line, "oom_kill %d", &n); err == nil {
				return n
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory/memory.oom_control"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var n int64
			if _, err := fmt.Sscanf(line, "oom_kill %d", &n); err == nil {
				return n
			}
		}
	}
	return 0
}

// processGone reports whether pid has exited (missing or a zombie). Snapshot writers are the
// kernel's children, not ours, so there is no wait to block on.
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}
