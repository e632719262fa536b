package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/runtimectl/runtimectl/egress"
)

// helloTimeout bounds the wait for a ClientHello (or the first bytes of a request).
const helloTimeout = 15 * time.Second

// serveConnect answers a CONNECT: the target must be allowed, and the ClientHello that follows
// must name it.
func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	h, ps, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(ps)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		plainError(w, http.StatusBadRequest, "runtimectl egress: CONNECT needs HOST:PORT, not "+strconv.Quote(r.Host))
		return
	}
	host := egress.NormalizeHost(h)
	if !p.allow.Allows(host, port) {
		p.refuse(w, refuseNotAllowed(p.words, egress.ViaConnect, host, port, p.allow))
		return
	}
	var upstream net.Conn
	if len(p.secretsFor(host, port)) == 0 {
		upstream, err = p.dialer.connect(r.Context(), egress.ViaConnect, host, port)
	} else {
		_, err = p.dialer.check(r.Context(), egress.ViaConnect, host, port) // the transport dials later
	}
	if err != nil {
		var re *refusedError
		if errors.As(err, &re) {
			p.refuse(w, re.r)
			return
		}
		plainError(w, http.StatusBadGateway, err.Error())
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		closeConn(upstream)
		plainError(w, http.StatusInternalServerError, "runtimectl egress: cannot take over the connection")
		return
	}
	c, bw, err := hj.Hijack()
	if err != nil {
		closeConn(upstream)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		closeConn(upstream)
		return
	}
	p.tunnel(context.Background(), &bufConn{Conn: c, r: bw.Reader}, host, port, upstream)
}

// serveTransparent serves a connection the session made to an allowed name's port on its
// loopback: TLS is known by its server name, anything else must be HTTP with a Host.
func (p *Proxy) serveTransparent(ctx context.Context, c net.Conn, port int) {
	p.tunnel(ctx, c, "", port, nil)
}

// tunnel reads what the client sends first. TLS: its ClientHello's server name must be host
// (a CONNECT's target) or, when host is "" (a transparent connection), an allowed name; then
// the connection is spliced to upstream (dialled here when nil), or terminated for a secret
// host. Not TLS: a transparent connection goes to the HTTP server; in a CONNECT it is refused.
func (p *Proxy) tunnel(ctx context.Context, c net.Conn, host string, port int, upstream net.Conn) {
	via := egress.ViaTLS
	if host != "" {
		via = egress.ViaConnect
	}
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		closeConn(upstream)
		return
	}
	if first[0] != 0x16 { // not a TLS handshake record
		closeConn(upstream)
		if host != "" {
			r := refuseProtocol(via, host, port)
			p.refused(r)
			writeRawRefusal(c, r.Message) // readable if it was HTTP
			return
		}
		c.SetReadDeadline(time.Time{})
		p.conns.push(&relayedConn{Conn: &bufConn{Conn: c, r: br}, info: connInfo{transparent: true, port: port}})
		return
	}
	hello, raw, err := readClientHello(br)
	if err != nil {
		closeConn(upstream)
		r := refuseProtocol(via, host, port)
		p.refused(r)
		sendAlert(c)
		return
	}
	c.SetReadDeadline(time.Time{})
	sni := egress.NormalizeHost(hello.ServerName)
	switch {
	case host == "" && sni == "":
		closeConn(upstream)
		p.refusedTLS(c, refuseProtocol(via, "", port))
		return
	case host == "":
		host = sni
		if !p.allow.Allows(host, port) {
			p.refusedTLS(c, refuseNotAllowed(p.words, via, host, port, p.allow))
			return
		}
	case sni == "":
		if _, isAddr := egress.ParseAddr(host); !isAddr { // an allowed address may be reached without a name
			closeConn(upstream)
			p.refusedTLS(c, refuseMismatch(via, host, port, "a ClientHello with no server name", host, ""))
			return
		}
	case sni != host:
		closeConn(upstream)
		p.refusedTLS(c, refuseMismatch(via, host, port, "the TLS server name", host, hello.ServerName))
		return
	}
	client := &bufConn{Conn: c, r: io.MultiReader(bytes.NewReader(raw), br)}
	if len(p.secretsFor(host, port)) > 0 && sni != "" {
		closeConn(upstream)
		p.terminateTLS(client, host, port)
		return
	}
	if upstream == nil {
		if upstream, err = p.dialer.connect(ctx, via, host, port); err != nil {
			var re *refusedError
			if errors.As(err, &re) {
				p.refusedTLS(c, re.r)
			} else {
				p.log.Debug("egress: dial", "host", host, "port", port, "err", err)
				sendAlert(c)
			}
			return
		}
	}
	egress.Splice(ctx, client, upstream)
}

// refusedTLS counts and logs a refusal made after the client began TLS, and answers with the
// TLS alert access_denied: no message can be read there, the log says which.
func (p *Proxy) refusedTLS(c net.Conn, r Refusal) {
	p.refused(r)
	sendAlert(c)
}

// sendAlert writes a fatal TLS alert, access_denied, and closes c.
func sendAlert(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49})
	c.Close()
}

func writeRawRefusal(c net.Conn, msg string) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	body := msg + "\n"
	io.WriteString(c, "HTTP/1.1 403 "+statusText(msg)+"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\nX-Runtimectl-Egress: refused\r\nConnection: close\r\n\r\n"+body)
	c.Close()
}

// terminateTLS completes the handshake with a certificate for host from the session's CA, and
// hands the connection to the HTTP server, which forwards its requests with the secrets.
func (p *Proxy) terminateTLS(c net.Conn, host string, port int) {
	tc := tls.Server(c, &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.ca.Leaf(host) },
		NextProtos:     []string{"http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	tc.SetDeadline(time.Now().Add(helloTimeout))
	if err := tc.Handshake(); err != nil {
		p.log.Debug("egress: terminate TLS", "host", host, "err", err)
		tc.Close()
		return
	}
	tc.SetDeadline(time.Time{})
	p.conns.push(&relayedConn{Conn: tc, info: connInfo{terminated: true, host: host, port: port}})
}

// errHello ends the handshake once the ClientHello is read.
var errHello = errors.New("client hello read")

// readClientHello reads a TLS ClientHello from r with crypto/tls's own parser, and returns
// it with the bytes it took from r, which the caller sends on.
func readClientHello(r io.Reader) (*tls.ClientHelloInfo, []byte, error) {
	hc := &helloConn{r: r}
	var hello *tls.ClientHelloInfo
	err := tls.Server(hc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hello = &tls.ClientHelloInfo{ServerName: h.ServerName, SupportedProtos: slices.Clone(h.SupportedProtos)}
			return nil, errHello
		},
	}).Handshake()
	if hello == nil {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return nil, nil, err
	}
	return hello, hc.buf.Bytes(), nil
}

// helloConn records what is read through it and writes nothing: crypto/tls's alert after
// GetConfigForClient's error goes nowhere.
type helloConn struct {
	r   io.Reader
	buf bytes.Buffer
}

func (c *helloConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.buf.Write(b[:n])
	return n, err
}
func (c *helloConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *helloConn) Close() error                     { return nil }
func (c *helloConn) LocalAddr() net.Addr              { return relayAddr{} }
func (c *helloConn) RemoteAddr() net.Addr             { return relayAddr{} }
func (c *helloConn) SetDeadline(time.Time) error      { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c *helloConn) SetWriteDeadline(time.Time) error { return nil }

func closeConn(c net.Conn) {
	if c != nil {
		c.Close()
	}
}
