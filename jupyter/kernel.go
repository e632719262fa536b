package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Config is what a Kernel needs.
type Config struct {
	Conn    ConnectionInfo
	Backend Backend
	Logger  *slog.Logger // default: discard
	// SendTimeout bounds one send on a socket (default 10 s).
	SendTimeout time.Duration
}

// Kernel serves one connection file's sockets.
type Kernel struct {
	cfg     Config
	signer  Signer
	session string // this kernel's session id, in every header it sends
	log     *slog.Logger

	shell, control, stdin, iopub, hb zmq4.Socket
	shellMu, controlMu, iopubMu      sync.Mutex

	// subscribed is set once iopub has had a subscriber (see awaitSubscriber).
	subscribed atomic.Bool

	shutdownOnce sync.Once
	shutdown     chan ShutdownRequest
}

// New checks cfg and returns a Kernel; Run binds its sockets.
func New(cfg Config) (*Kernel, error) {
	if cfg.Backend == nil {
		return nil, errors.New("jupyter kernel: no backend")
	}
	if err := cfg.Conn.Check(); err != nil {
		return nil, err
	}
	s, err := NewSigner(cfg.Conn.SignatureScheme, cfg.Conn.Key)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	return &Kernel{cfg: cfg, signer: s, session: NewID(), log: cfg.Logger, shutdown: make(chan ShutdownRequest, 1)}, nil
}

// Run binds the sockets and serves until a shutdown_request has been answered and the
// Backend's Shutdown has returned, or ctx ends. It returns the shutdown request (restart or
// not; zero when ctx ended).
func (k *Kernel) Run(ctx context.Context) (ShutdownRequest, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []zmq4.Option{zmq4.WithTimeout(k.cfg.SendTimeout), zmq4.WithLogger(discardLogger())}
	k.shell = zmq4.NewRouter(ctx, opts...)
	k.control = zmq4.NewRouter(ctx, opts...)
	k.stdin = zmq4.NewRouter(ctx, opts...)
	k.iopub = zmq4.NewPub(ctx, opts...)
	k.hb = zmq4.NewRep(ctx, opts...)
	socks := []struct {
		s    zmq4.Socket
		port int
		name string
	}{{k.shell, k.cfg.Conn.ShellPort, "shell"}, {k.control, k.cfg.Conn.ControlPort, "control"}, {k.stdin, k.cfg.Conn.StdinPort, "stdin"}, {k.iopub, k.cfg.Conn.IOPubPort, "iopub"}, {k.hb, k.cfg.Conn.HBPort, "heartbeat"}}
	defer func() {
		for _, s := range socks {
			_ = s.s.Close()
		}
	}()
	for _, s := range socks {
		if err := s.s.Listen(k.cfg.Conn.Endpoint(s.port)); err != nil {
			return ShutdownRequest{}, fmt.Errorf("jupyter kernel: %s socket on %s: %w", s.name, k.cfg.Conn.Endpoint(s.port), err)
		}
	}
	k.publish(nil, "status", map[string]string{"execution_state": "starting"})
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); k.heartbeat(ctx) }()
	go func() { defer wg.Done(); k.serve(ctx, k.shell, &k.shellMu, "shell") }()
	go func() { defer wg.Done(); k.serve(ctx, k.control, &k.controlMu, "control") }()
	go func() { defer wg.Done(); k.drain(ctx, k.stdin) }()
	var req ShutdownRequest
	select {
	case req = <-k.shutdown:
	case <-ctx.Done():
	}
	cancel()
	for _, s := range socks {
		_ = s.s.Close()
	}
	wg.Wait()
	return req, nil
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func (k *Kernel) heartbeat(ctx context.Context) {
	for ctx.Err() == nil {
		m, err := k.hb.Recv()
		if err != nil {
			if ctx.Err() == nil {
				k.log.Debug("heartbeat receive", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		if err := k.hb.Send(m); err != nil && ctx.Err() == nil {
			k.log.Debug("heartbeat send", "err", err)
		}
	}
}

// drain reads the stdin socket (nothing is asked on it) so that it never fills.
func (k *Kernel) drain(ctx context.Context, s zmq4.Socket) {
	for ctx.Err() == nil {
		if _, err := s.Recv(); err != nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// serve reads requests from a ROUTER socket and handles them one at a time.
func (k *Kernel) serve(ctx context.Context, s zmq4.Socket, mu *sync.Mutex, channel string) {
	for ctx.Err() == nil {
		raw, err := s.Recv()
		if err != nil {
			if ctx.Err() == nil {
				k.log.Debug("receive", "channel", channel, "err", err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		m, err := Parse(raw.Frames, k.signer)
		if err != nil {
			k.log.Warn("dropped a message", "channel", channel, "err", err)
			continue
		}
		k.handle(ctx, m, func(reply *Message) {
			mu.Lock()
			defer mu.Unlock()
			if err := s.Send(zmq4.NewMsgFrom(reply.Frames(k.signer)...)); err != nil {
				k.log.Warn("reply", "channel", channel, "type", reply.Header.MsgType, "err", err)
			}
		})
	}
}

// publish sends a message on iopub, parented to parent (nil: none).
func (k *Kernel) publish(parent *Message, msgType string, content any) {
	m, err := Reply(parent, k.session, msgType, content)
	if err != nil {
		k.log.Error("publish", "type", msgType, "err", err)
		return
	}
	m.Identities = [][]byte{[]byte("kernel." + k.session[:8] + "." + msgType)}
	k.iopubMu.Lock()
	defer k.iopubMu.Unlock()
	if err := k.iopub.Send(zmq4.NewMsgFrom(m.Frames(k.signer)...)); err != nil {
		k.log.Debug("publish", "type", msgType, "err", err)
	}
}

// SubscriberWait bounds how long the first request waits for a subscriber on iopub.
const SubscriberWait = 3 * time.Second

// awaitSubscriber waits, before the kernel's first request is answered, until a client has
// subscribed to iopub (at most SubscriberWait): a PUB socket drops what it sends before the
// subscription arrives, and a client that connects and asks at once (a restarted kernel's
// client) would miss the busy status, or the idle it waits for.
func (k *Kernel) awaitSubscriber() {
	if k.subscribed.Load() {
		return
	}
	t, ok := k.iopub.(interface{ Topics() []string })
	if !ok {
		k.subscribed.Store(true)
		return
	}
	deadline := time.Now().Add(SubscriberWait)
	for len(t.Topics()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	k.subscribed.Store(true)
}

func (k *Kernel) status(parent *Message, state string) {
	k.publish(parent, "status", map[string]string{"execution_state": state})
}

// handle answers one request; send sends on the socket it came from.
func (k *Kernel) handle(ctx context.Context, m *Message, send func(*Message)) {
	reply := func(msgType string, content any) {
		r, err := Reply(m, k.session, msgType, content)
		if err != nil {
			k.log.Error("reply", "type", msgType, "err", err)
			return
		}
		send(r)
	}
	t := m.Header.MsgType
	k.awaitSubscriber()
	if t == "shutdown_request" {
		// No status around it: a client reading iopub until "idle" after a restart must not
		// take this kernel's last idle for its next execution's.
		var req ShutdownRequest
		_ = m.Decode(&req)
		reply("shutdown_reply", map[string]any{"status": "ok", "restart": req.Restart})
		k.shutdownOnce.Do(func() {
			if err := k.cfg.Backend.Shutdown(ctx, req.Restart); err != nil {
				k.log.Error("shutdown", "err", err)
			}
			k.shutdown <- req
		})
		return
	}
	k.status(m, "busy")
	defer k.status(m, "idle")
	switch t {
	case "kernel_info_request":
		info := k.cfg.Backend.Info(ctx)
		info.Status, info.ProtocolVersion = StatusOK, ProtocolVersion
		if info.HelpLinks == nil {
			info.HelpLinks = []HelpLink{}
		}
		reply("kernel_info_reply", info)
	case "execute_request":
		k.execute(ctx, m, reply)
	case "complete_request":
		var req CompleteRequest
		if k.decode(m, &req, reply) {
			r, err := k.cfg.Backend.Complete(ctx, req)
			if err != nil {
				k.log.Warn("complete", "err", err)
				r = CompleteReply{CursorStart: req.CursorPos, CursorEnd: req.CursorPos}
			}
			r.Status = StatusOK
			if r.Matches == nil {
				r.Matches = []string{}
			}
			r.Metadata = object(r.Metadata)
			reply("complete_reply", r)
		}
	case "inspect_request":
		var req InspectRequest
		if k.decode(m, &req, reply) {
			r, err := k.cfg.Backend.Inspect(ctx, req)
			if err != nil {
				k.log.Warn("inspect", "err", err)
				r = InspectReply{}
			}
			r.Status = StatusOK
			if r.Data == nil {
				r.Data = Bundle{}
			}
			r.Metadata = object(r.Metadata)
			reply("inspect_reply", r)
		}
	case "is_complete_request":
		var req IsCompleteRequest
		if k.decode(m, &req, reply) {
			r, err := k.cfg.Backend.IsComplete(ctx, req)
			if err != nil || r.Status == "" {
				r = IsCompleteReply{Status: "unknown"}
			}
			reply("is_complete_reply", r)
		}
	case "history_request":
		var req HistoryRequest
		if k.decode(m, &req, reply) {
			entries, err := k.cfg.Backend.History(ctx, req)
			if err != nil {
				k.log.Warn("history", "err", err)
			}
			reply("history_reply", map[string]any{"status": StatusOK, "history": historyTuples(entries, req.Output)})
		}
	case "comm_info_request":
		reply("comm_info_reply", map[string]any{"status": StatusOK, "comms": map[string]any{}})
	case "comm_open":
		// No comm targets: closed again, as ipykernel does for an unknown target.
		var c struct {
			CommID string `json:"comm_id"`
		}
		_ = m.Decode(&c)
		k.publish(m, "comm_close", map[string]any{"comm_id": c.CommID, "data": map[string]any{}})
	case "comm_msg", "comm_close":
	case "interrupt_request":
		if err := k.cfg.Backend.Interrupt(ctx); err != nil {
			k.log.Warn("interrupt", "err", err)
		}
		reply("interrupt_reply", map[string]string{"status": StatusOK})
	default:
		k.log.Warn("unknown message type", "type", t)
	}
}

// decode unmarshals m's content into v; on failure it replies with an error and says false.
func (k *Kernel) decode(m *Message, v any, reply func(string, any)) bool {
	if err := m.Decode(v); err != nil {
		k.log.Warn("bad request", "err", err)
		t := m.Header.MsgType
		if len(t) > len("_request") && t[len(t)-len("_request"):] == "_request" {
			reply(t[:len(t)-len("_request")]+"_reply", map[string]any{"status": StatusError, "ename": "BadRequest", "evalue": err.Error(), "traceback": []string{}})
		}
		return false
	}
	return true
}

func (k *Kernel) execute(ctx context.Context, m *Message, reply func(string, any)) {
	var req ExecuteRequest
	if !k.decode(m, &req, reply) {
		return
	}
	p := &Publisher{k: k, parent: m, silent: req.Silent}
	r := k.cfg.Backend.Execute(ctx, req, p)
	if r.Status == "" {
		r.Status = StatusOK
	}
	if r.UserExpressions == nil {
		r.UserExpressions = map[string]any{}
	}
	if r.Payload == nil {
		r.Payload = []any{}
	}
	if r.Status == StatusError {
		if r.Traceback == nil {
			r.Traceback = []string{}
		}
		p.Error(r.Ename, r.Evalue, r.Traceback)
	}
	reply("execute_reply", r)
}

// historyTuples is history_reply's list: (session, line, input) or, with output,
// (session, line, (input, output)).
func historyTuples(entries []HistoryEntry, output bool) []any {
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		if output {
			var o any
			if e.Output != nil {
				o = *e.Output
			}
			out = append(out, []any{e.Session, e.Line, []any{e.Input, o}})
		} else {
			out = append(out, []any{e.Session, e.Line, e.Input})
		}
	}
	return out
}

// RawJSON is a convenience for content built by hand.
func RawJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
