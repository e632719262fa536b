package egress

import (
	"encoding/json"
	"fmt"
	"time"
)

// Reason says why a destination was refused; /metrics counts refusals by it.
type Reason string

// Reasons.
const (
	// ReasonNotAllowed: the name, or the port for that name, is not in the allowlist.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonAddress: a literal address where a name is needed, or a name that resolves only
	// to addresses the proxy refuses (loopback, link-local, the engine's host).
	ReasonAddress Reason = "address"
	// ReasonMismatch: the TLS server name is not the CONNECT target, or the Host of a request
	// inside terminated TLS is not its server name.
	ReasonMismatch Reason = "mismatch"
	// ReasonProtocol: neither TLS nor HTTP where the proxy needs one to know the host.
	ReasonProtocol Reason = "protocol"
)

// Reasons lists every Reason.
var Reasons = []Reason{ReasonNotAllowed, ReasonAddress, ReasonMismatch, ReasonProtocol}

// How a destination was asked for.
const (
	ViaDNS     = "dns"     // a query to the session's resolver
	ViaHTTP    = "http"    // a plain HTTP request (through the proxy, or to an allowed name's port)
	ViaConnect = "connect" // a CONNECT through the proxy (HTTPS)
	ViaTLS     = "tls"     // TLS to an allowed name's port, by its server name
)

// The msg of the proxy's log lines.
const (
	LogRefused = "egress refused"
	LogReady   = "egress proxy ready"
)

// LogLine is a refusal line of a proxy's log (JSON, one per line; at most a few a second are
// written, and each carries the counts of every refusal so far in Refusals, so the last line
// alone says how many there were).
type LogLine struct {
	Time     time.Time        `json:"time"`
	Msg      string           `json:"msg"`
	Session  string           `json:"session"`
	Via      string           `json:"via"`
	Host     string           `json:"host"`
	Port     int              `json:"port"`
	Reason   Reason           `json:"reason"`
	Message  string           `json:"message"`
	Refusals map[Reason]int64 `json:"refusals"`
	// NotLogged counts the refusals since the line before that were counted but not written.
	NotLogged int64 `json:"not_logged"`
}

// ParseLogLine parses one line of a proxy's log; ok is false for a line that is not a refusal
// (the proxy's start, an error).
func ParseLogLine(line string) (l LogLine, ok bool) {
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Msg != LogRefused {
		return LogLine{}, false
	}
	return l, true
}

// String words a refusal line for `session logs`.
func (l LogLine) String() string {
	where := l.Host
	if l.Port != 0 {
		where = HostPort(l.Host, l.Port)
	}
	s := fmt.Sprintf("%s egress refused %s (%s, %s): %s", l.Time.UTC().Format(time.RFC3339), where, l.Via, l.Reason, l.Message)
	if l.NotLogged > 0 {
		s += fmt.Sprintf(" [%d more refusals before this one were counted, not logged]", l.NotLogged)
	}
	return s
}
