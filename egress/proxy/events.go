package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/time/rate"

	"github.com/runtimectl/runtimectl/egress"
)

// Refusal is one refused destination.
type Refusal struct {
	Via    string
	Host   string // as asked (a name or an address)
	Port   int    // 0 for DNS
	Reason egress.Reason
	// Message is what the session's code is told.
	Message string
}

// events counts refusals and logs them as JSON lines (egress.LogLine): at most a few per
// second, and each line that is written carries the counts so far, so the controller reads the
// counts from the last line alone and no line is needed for one that was not written.
type events struct {
	session string
	log     *slog.Logger
	limit   *rate.Limiter

	mu         sync.Mutex
	counts     map[egress.Reason]int64
	suppressed int64
}

func newEvents(session string, log *slog.Logger) *events {
	return &events{session: session, log: log, limit: rate.NewLimiter(rate.Limit(20), 50), counts: map[egress.Reason]int64{}}
}

func (e *events) refused(r Refusal) {
	e.mu.Lock()
	e.counts[r.Reason]++
	counts := maps.Clone(e.counts)
	if !e.limit.Allow() {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.suppressed = 0
	e.mu.Unlock()
	attrs := []slog.Attr{
		slog.String("session", e.session),
		slog.String("via", r.Via),
		slog.String("host", r.Host),
		slog.String("reason", string(r.Reason)),
		slog.String("message", r.Message),
		slog.Any("refusals", counts),
	}
	if r.Port != 0 {
		attrs = append(attrs, slog.Int("port", r.Port))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("not_logged", suppressed))
	}
	e.log.LogAttrs(context.Background(), slog.LevelWarn, egress.LogRefused, attrs...)
}

func (e *events) snapshot() map[egress.Reason]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.counts)
}

// The words of refusals. They name the host and the flag that would allow it, since the code
// (or the model that wrote it) reads them.

// words are who a proxy serves and the flag that allows a host there, as its refusals say them:
// "session NAME" and --allow-host unless its Config says otherwise (an installer's proxy).
type words struct{ who, flag string }

func wordsOf(cfg egress.Config) words {
	w := words{who: cfg.Who, flag: cfg.AllowFlag}
	if w.who == "" {
		w.who = "session " + cfg.Session
	}
	if w.flag == "" {
		w.flag = "--allow-host"
	}
	return w
}

func refuseNotAllowed(w words, via, host string, port int, allow egress.Allowlist) Refusal {
	r := Refusal{Via: via, Host: host, Port: port, Reason: egress.ReasonNotAllowed}
	_, isAddr := egress.ParseAddr(host)
	switch {
	case via == egress.ViaDNS:
		r.Message = fmt.Sprintf("runtimectl egress: %s is not allowed in %s; allow it with %s %s", host, w.who, w.flag, host)
	case len(allow.PortsFor(host)) > 0:
		r.Message = fmt.Sprintf("runtimectl egress: %s is allowed in %s on port %s only, not %d; allow it with %s %s",
			host, w.who, joinPorts(allow.PortsFor(host)), port, w.flag, egress.HostPort(host, port))
	case isAddr:
		r.Reason = egress.ReasonAddress
		r.Message = fmt.Sprintf("runtimectl egress: %s is an address; %s reaches hosts by name (allow this address itself with %s %s)",
			host, w.who, w.flag, egress.HostPort(host, port))
	default:
		arg := host
		if !slices.Contains(egress.WebPorts, port) {
			arg = egress.HostPort(host, port)
		}
		r.Message = fmt.Sprintf("runtimectl egress: %s is not allowed in %s; allow it with %s %s", egress.HostPort(host, port), w.who, w.flag, arg)
	}
	return r
}

func refuseAddress(w words, via, host string, port int, addr, what string) Refusal {
	return Refusal{Via: via, Host: host, Port: port, Reason: egress.ReasonAddress, Message: fmt.Sprintf(
		"runtimectl egress: %s resolves to %s (%s), which %s may not reach; allow that address itself with %s %s",
		host, addr, what, w.who, w.flag, egress.HostPort(addr, port))}
}

func refuseMismatch(via, host string, port int, what, asked, named string) Refusal {
	return Refusal{Via: via, Host: host, Port: port, Reason: egress.ReasonMismatch, Message: fmt.Sprintf(
		"runtimectl egress: %s %q is not %q, the host this connection was allowed for; the proxy refuses a connection that names two hosts", what, named, asked)}
}

func refuseProtocol(via, host string, port int) Refusal {
	where := "port " + strconv.Itoa(port)
	if host != "" {
		where = egress.HostPort(host, port)
	}
	return Refusal{Via: via, Host: host, Port: port, Reason: egress.ReasonProtocol, Message: fmt.Sprintf(
		"runtimectl egress: what was sent to %s is neither TLS with a server name nor HTTP; the proxy passes HTTP and HTTPS to allowed names only (--allow-host)", where)}
}

func joinPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	if len(s) > 1 {
		return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
	}
	return s[0]
}
