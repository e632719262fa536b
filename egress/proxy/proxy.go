package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/egress"
)

const preambleTimeout = 10 * time.Second

// Proxy is one session's egress proxy.
type Proxy struct {
	session string
	words   words
	allow   egress.Allowlist
	secrets []secret
	ca      *CA // nil without secrets
	answer  netip.Addr
	dialer  *dialer
	events  *events
	log     *slog.Logger

	forward   *httputil.ReverseProxy // plain HTTP
	terminate *httputil.ReverseProxy // HTTP inside TLS terminated for a secret host
	server    *http.Server
	conns     *connListener
}

// Option changes a Proxy made by New.
type Option func(*options)

type options struct {
	log      *slog.Logger
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	ownAddrs bool
}

// WithLogger sends the proxy's log (refusals, as JSON lines for the controller) to l.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithDialer replaces the dialer of upstream connections (tests).
func WithDialer(d func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dial = d }
}

// WithLookup replaces the system's resolver for names that egress.Config.Hosts does not hold (tests).
func WithLookup(f func(ctx context.Context, host string) ([]netip.Addr, error)) Option {
	return func(o *options) { o.lookup = f }
}

// withoutOwnAddresses leaves the proxy's own addresses and gateways allowed (unit tests,
// whose upstreams are on this machine's addresses).
func withoutOwnAddresses() Option { return func(o *options) { o.ownAddrs = false } }

// New makes a session's proxy from cfg.
func New(cfg egress.Config, opts ...Option) (*Proxy, error) {
	o := options{log: slog.New(slog.DiscardHandler), ownAddrs: true, lookup: systemLookup}
	for _, opt := range opts {
		opt(&o)
	}
	if o.dial == nil {
		o.dial = (&net.Dialer{}).DialContext
	}
	pc, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	deny := pc.deny
	if o.ownAddrs {
		deny = append(deny, ownAddresses()...)
	}
	p := &Proxy{
		session: cfg.Session,
		words:   wordsOf(cfg),
		allow:   pc.allow,
		secrets: pc.secrets,
		answer:  pc.answer,
		events:  newEvents(cfg.Session, o.log),
		log:     o.log,
		dialer:  &dialer{session: cfg.Session, words: wordsOf(cfg), allow: pc.allow, hosts: pc.hosts, deny: deny, lookup: o.lookup, dial: o.dial},
		conns:   newConnListener(),
	}
	if len(p.secrets) > 0 {
		if p.ca, err = p.loadCA(cfg); err != nil {
			return nil, err
		}
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if cfg.UpstreamCAs != "" && !roots.AppendCertsFromPEM([]byte(cfg.UpstreamCAs)) {
		return nil, errors.New("egress config: upstream_cas holds no PEM certificate")
	}
	p.forward = p.reverseProxy(egress.ViaHTTP, nil)
	p.terminate = p.reverseProxy(egress.ViaTLS, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	p.server = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if rc, ok := c.(*relayedConn); ok {
				return context.WithValue(ctx, connKey{}, rc.info)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(o.log.Handler(), slog.LevelDebug),
	}
	go p.server.Serve(p.conns) //nolint:errcheck // ends with Close
	return p, nil
}

func (p *Proxy) loadCA(cfg egress.Config) (*CA, error) {
	var names []string
	for _, s := range p.secrets {
		names = append(names, s.rule.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if cfg.CACert != "" || cfg.CAKey != "" {
		return LoadCA([]byte(cfg.CACert), []byte(cfg.CAKey))
	}
	if cfg.StateDir == "" {
		return nil, errors.New("egress config: secret headers need a CA: give ca_cert and ca_key, or a state_dir to keep one in")
	}
	return loadOrCreateCA(cfg.StateDir, cfg.Session, names)
}

// CACertPEM returns the session's CA certificate (nil without secret headers).
func (p *Proxy) CACertPEM() []byte {
	if p.ca == nil {
		return nil
	}
	return p.ca.certPEM
}

// Refusals returns the refusals counted so far, by reason.
func (p *Proxy) Refusals() map[egress.Reason]int64 { return p.events.snapshot() }

// Close stops serving; connections being relayed end.
func (p *Proxy) Close() error {
	p.conns.Close()
	return p.server.Close()
}

// Serve takes relayed connections from l until it fails or ctx ends.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		go p.ServeConn(ctx, c)
	}
}

// ServeConn serves one relayed connection: its preamble, then what the kind says.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(preambleTimeout))
	br := bufio.NewReaderSize(c, 4096)
	kind, port, err := readPreamble(br)
	if err != nil {
		p.log.Debug("egress: bad preamble", "err", err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	conn := &bufConn{Conn: c, r: br}
	switch kind {
	case egress.KindProxy:
		p.conns.push(&relayedConn{Conn: conn, info: connInfo{}})
	case egress.KindDNS:
		p.serveDNSStream(ctx, conn)
	case egress.KindTCP:
		p.serveTransparent(ctx, conn, port)
	case egress.KindCA:
		conn.Write(p.CACertPEM())
		conn.Close()
	}
}

func readPreamble(br *bufio.Reader) (kind string, port int, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", 0, fmt.Errorf("read preamble: %w", err)
	}
	fs := strings.Fields(string(line))
	if len(fs) != 3 || fs[0] != egress.PreambleMagic {
		return "", 0, fmt.Errorf("preamble %q", line)
	}
	port, err = strconv.Atoi(fs[2])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("preamble port %q", fs[2])
	}
	switch fs[1] {
	case egress.KindProxy, egress.KindDNS, egress.KindTCP, egress.KindCA:
		return fs[1], port, nil
	}
	return "", 0, fmt.Errorf("preamble kind %q", fs[1])
}

func (p *Proxy) refused(r Refusal) { p.events.refused(r) }

// connInfo says how an HTTP connection came: through the proxy port (the zero value), to an
// allowed name's port (transparent), or inside TLS the proxy terminated for host.
type connInfo struct {
	transparent bool
	port        int
	terminated  bool
	host        string // the TLS server name, when terminated
}

type connKey struct{}

func infoOf(r *http.Request) connInfo {
	ci, _ := r.Context().Value(connKey{}).(connInfo)
	return ci
}

// relayedConn is a connection handed to the HTTP server, with how it came.
type relayedConn struct {
	net.Conn
	info connInfo
}

// bufConn is a connection whose first bytes were read into r.
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes when the connection underneath can.
func (c *bufConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connListener is a net.Listener fed with connections by push: how relayed connections reach
// the HTTP server.
type connListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "relay" }
func (relayAddr) String() string  { return "relay" }
