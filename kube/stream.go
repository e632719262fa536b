package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// executor returns a pods/exec executor for cmd in the session's agent container: WebSocket
// first, as kubectl 1.31+ does, SPDY when the server or a proxy on the way refuses the upgrade.
func (b *Backend) executor(pod string, cmd []string, stdin bool) (remotecommand.Executor, error) {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: ContainerName, Command: cmd, Stdin: stdin, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
}

// ExitError is a command run in a pod that ended with a non-zero status.
type ExitError struct {
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	if e.Stderr != "" {
		return fmt.Sprintf("exit status %d: %s", e.Code, oneLine(e.Stderr))
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// run runs cmd in the session's agent container with stdin (nil: none) and stdout, and waits for
// its end. A non-zero exit is *ExitError with the command's stderr (the first 4 KiB).
func (b *Backend) run(ctx context.Context, session string, cmd []string, stdin io.Reader, stdout io.Writer) error {
	pod, err := b.get(ctx, session)
	if err != nil {
		return err
	}
	ex, err := b.executor(pod.Name, cmd, stdin != nil)
	if err != nil {
		return err
	}
	errb := &capBuffer{max: 4096}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: errb})
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return &ExitError{Code: ce.Code, Stderr: errb.String()}
	}
	if err != nil {
		return b.classify(err)
	}
	return nil
}

// Dial opens a private duplex stream to the session's agent: a pods/exec of `runtime-agent
// connect` with its stdin and stdout as the stream (no TTY). The stream outlives ctx, which
// bounds only the check that the pod runs; Close ends the relay, the agent goes on.
func (b *Backend) Dial(ctx context.Context, session string) (io.ReadWriteCloser, error) {
	pod, err := b.get(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("open a stream to session %q: %w", session, err)
	}
	if in := info(pod); !in.Running {
		return nil, fmt.Errorf("open a stream to session %q: its pod is %s, not running", session, in.State)
	}
	ex, err := b.executor(pod.Name, ConnectArgs, true)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stream{in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		errb := &capBuffer{max: 4096}
		err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: errb})
		switch {
		case err == nil || sctx.Err() != nil:
			err = io.EOF
		default:
			err = fmt.Errorf("stream to session %q: %w", session, b.classify(err))
		}
		if errb.Len() > 0 && errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w (relay said: %s)", io.EOF, bytes.TrimSpace(errb.Bytes()))
		}
		outW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	return s, nil
}

// stream is the client's end of a pods/exec relay.
type stream struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (s *stream) Read(p []byte) (int, error)  { return s.out.Read(p) }
func (s *stream) Write(p []byte) (int, error) { return s.in.Write(p) }

// Close ends the relay's stdin and the exec; it does not wait for the server.
func (s *stream) Close() error {
	s.once.Do(func() {
		_ = s.in.Close()
		s.cancel()
		_ = s.out.Close()
	})
	return nil
}

// capBuffer keeps the first max bytes written to it and drops the rest.
type capBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

func (c *capBuffer) String() string { return string(c.Bytes()) }

func (c *capBuffer) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Len()
}
