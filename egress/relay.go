package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Relayed connections begin with one line, "RUNTIMECTL-EGRESS/1 KIND PORT\n":
//
//	proxy 3128   the session's HTTP proxy (absolute-form HTTP requests and CONNECT)
//	dns 53       DNS messages, each with the two-byte length of DNS over TCP
//	tcp PORT     a connection the session made to an allowed name's address on PORT:
//	             TLS (by its server name) or HTTP (by its Host)
//	ca 0         the session's CA certificate (PEM; nothing without secret headers), then EOF
const PreambleMagic = "RUNTIMECTL-EGRESS/1"

// Kinds of relayed connections.
const (
	KindProxy = "proxy"
	KindDNS   = "dns"
	KindTCP   = "tcp"
	KindCA    = "ca"
)

// Preamble returns the line that begins a relayed connection.
func Preamble(kind string, port int) string {
	return PreambleMagic + " " + kind + " " + strconv.Itoa(port) + "\n"
}

// Relay is the session's side of egress, run by its agent: listeners on the session's loopback
// (its only network) for the proxy port, DNS (TCP and UDP) and the ports of allowed names, each
// connection relayed to the proxy with its preamble.
type Relay struct {
	dial func(ctx context.Context) (net.Conn, error)
	log  *slog.Logger
	tcp  []relayListener
	udp  net.PacketConn
}

type relayListener struct {
	l    net.Listener
	kind string
	port int
}

// Dialer returns the dialer of a proxy address: "unix:PATH" or "tcp:HOST:PORT".
func Dialer(target string) (func(ctx context.Context) (net.Conn, error), error) {
	network, addr, ok := strings.Cut(target, ":")
	if !ok || addr == "" || (network != "unix" && network != "tcp") {
		return nil, fmt.Errorf("egress proxy address %q: give unix:PATH or tcp:HOST:PORT", target)
	}
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return d.DialContext(ctx, network, addr)
	}, nil
}

// Listen is net.Listen for a proxy address ("unix:PATH" or "tcp:ADDR"); a unix socket left
// by an earlier proxy is replaced.
func Listen(target string) (net.Listener, error) {
	network, addr, ok := strings.Cut(target, ":")
	if !ok || addr == "" || (network != "unix" && network != "tcp") {
		return nil, fmt.Errorf("egress listen address %q: give unix:PATH or tcp:ADDR", target)
	}
	l, err := net.Listen(network, addr)
	if err != nil && network == "unix" && errors.Is(err, syscall.EADDRINUSE) {
		if c, derr := net.Dial("unix", addr); derr == nil {
			c.Close()
			return nil, err // another proxy answers there
		}
		if rerr := os.Remove(addr); rerr == nil {
			l, err = net.Listen(network, addr)
		}
	}
	return l, err
}

// RelayConfig says where a Relay listens and where it relays.
type RelayConfig struct {
	Addr  string // the session's loopback address (AnswerAddr)
	Ports []int  // the allowed names' ports (Allowlist.Ports); the proxy and DNS ports among them are skipped
	Dial  func(ctx context.Context) (net.Conn, error)
	Log   *slog.Logger
	// Bind, for tests, gives the port to bind for each port (0: any free one); nil binds the
	// ports themselves.
	Bind func(port int) int
}

// ListenRelay binds the session's relay: the proxy port, DNS (TCP and UDP) and each of the
// allowed names' ports. It binds everything before it returns, so a caller that starts the
// session's code afterwards knows that no code took a port first.
func ListenRelay(c RelayConfig) (*Relay, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bind := c.Bind
	if bind == nil {
		bind = func(port int) int { return port }
	}
	addr, ports := c.Addr, c.Ports
	r := &Relay{dial: c.Dial, log: log}
	listen := func(kind string, port int) error {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(bind(port))))
		if err != nil {
			return fmt.Errorf("egress relay: %w", err)
		}
		r.tcp = append(r.tcp, relayListener{l: l, kind: kind, port: port})
		return nil
	}
	if err := listen(KindProxy, ProxyPort); err != nil {
		return nil, err
	}
	if err := listen(KindDNS, DNSPort); err != nil {
		r.Close()
		return nil, err
	}
	for _, p := range ports {
		if p == ProxyPort || p == DNSPort {
			continue
		}
		if err := listen(KindTCP, p); err != nil {
			r.Close()
			return nil, err
		}
	}
	u, err := net.ListenPacket("udp", net.JoinHostPort(addr, strconv.Itoa(bind(DNSPort))))
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("egress relay: %w", err)
	}
	r.udp = u
	return r, nil
}

// Addr returns where the relay listens for kind on port ("udp" for DNS over UDP).
func (r *Relay) Addr(kind string, port int) string {
	if kind == "udp" {
		return r.udp.LocalAddr().String()
	}
	for _, t := range r.tcp {
		if t.kind == kind && (t.port == port || kind != KindTCP) {
			return t.l.Addr().String()
		}
	}
	return ""
}

// Close closes the relay's listeners.
func (r *Relay) Close() {
	for _, t := range r.tcp {
		t.l.Close()
	}
	if r.udp != nil {
		r.udp.Close()
	}
}

// Serve relays until ctx ends, then closes the listeners.
func (r *Relay) Serve(ctx context.Context) {
	stop := context.AfterFunc(ctx, r.Close)
	defer stop()
	var wg sync.WaitGroup
	for _, t := range r.tcp {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.serveTCP(ctx, t)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.serveUDP(ctx)
	}()
	wg.Wait()
}

func (r *Relay) serveTCP(ctx context.Context, t relayListener) {
	for {
		c, err := t.l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			up, err := r.open(ctx, t.kind, t.port)
			if err != nil {
				r.log.Warn("egress relay: the proxy cannot be reached", "err", err)
				c.Close() // the code sees its connection end at once
				return
			}
			Splice(ctx, c, up)
		}()
	}
}

// open dials the proxy and sends the preamble.
func (r *Relay) open(ctx context.Context, kind string, port int) (net.Conn, error) {
	up, err := r.dial(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(up, Preamble(kind, port)); err != nil {
		up.Close()
		return nil, err
	}
	return up, nil
}

// maxUDPQueries bounds the DNS queries relayed at once.
const maxUDPQueries = 64

func (r *Relay) serveUDP(ctx context.Context) {
	sem := make(chan struct{}, maxUDPQueries)
	for {
		buf := make([]byte, 4096)
		n, from, err := r.udp.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // a flood: drop, as a loaded resolver would
		}
		go func() {
			defer func() { <-sem }()
			if a, err := r.query(ctx, buf[:n]); err == nil {
				r.udp.WriteTo(a, from)
			}
		}()
	}
}

// query relays one DNS message over a stream and returns the answer.
func (r *Relay) query(ctx context.Context, q []byte) ([]byte, error) {
	up, err := r.open(ctx, KindDNS, DNSPort)
	if err != nil {
		return nil, err
	}
	defer up.Close()
	return exchangeDNS(up, q)
}

// exchangeDNS sends one framed DNS message on c and reads the framed answer.
func exchangeDNS(c net.Conn, q []byte) ([]byte, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := binary.BigEndian.AppendUint16(nil, uint16(len(q)))
	if _, err := c.Write(append(msg, q...)); err != nil {
		return nil, err
	}
	var lenb [2]byte
	if _, err := io.ReadFull(c, lenb[:]); err != nil {
		return nil, err
	}
	a := make([]byte, binary.BigEndian.Uint16(lenb[:]))
	if _, err := io.ReadFull(c, a); err != nil {
		return nil, err
	}
	return a, nil
}

// FetchCA asks the proxy for the session's CA certificate (PEM; empty when the session has no
// secret headers).
func FetchCA(ctx context.Context, dial func(ctx context.Context) (net.Conn, error)) ([]byte, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, Preamble(KindCA, 0)); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(c, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return b, nil
}

// Splice copies both ways until both directions end (or ctx does), passing each side's end
// on as a half-close.
func Splice(ctx context.Context, a, b net.Conn) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		if _, err := io.Copy(dst, src); err != nil {
			closeBoth()
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			closeBoth()
		}
		done <- struct{}{}
	}
	go pipe(b, a)
	go pipe(a, b)
	<-done
	<-done
	closeBoth()
}
