package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/egress"
)

// serveHTTP is the handler of every HTTP connection the proxy serves: the session's proxy
// port, a plain HTTP connection to an allowed name's port, and HTTP inside terminated TLS.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ci := infoOf(r)
	switch {
	case ci.terminated:
		p.serveTerminated(w, r, ci)
	case ci.transparent:
		p.serveTransparentHTTP(w, r, ci)
	case r.Method == http.MethodConnect:
		p.serveConnect(w, r)
	default:
		p.serveProxied(w, r)
	}
}

// serveProxied forwards an absolute-form request (http://HOST/...) sent to the proxy port. As
// RFC 9112 says, the request line's host is the one that counts; net/http has already made it
// the request's Host.
func (p *Proxy) serveProxied(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() || r.URL.Host == "" {
		plainError(w, http.StatusBadRequest, "runtimectl egress: this is the session's HTTP proxy: send it requests for http://HOST/... (HTTP_PROXY does), and CONNECT for HTTPS")
		return
	}
	if r.URL.Scheme != "http" {
		plainError(w, http.StatusBadRequest, fmt.Sprintf("runtimectl egress: %s:// through the proxy: use CONNECT for HTTPS (HTTPS_PROXY does)", r.URL.Scheme))
		return
	}
	host, port, err := splitHostDefault(r.URL.Host, 80)
	if err != nil {
		plainError(w, http.StatusBadRequest, "runtimectl egress: "+err.Error())
		return
	}
	p.forwardHTTP(w, r, host, port)
}

// serveTransparentHTTP forwards a request that came to an allowed name's port on the session's
// loopback (code that ignores HTTP_PROXY resolved the name to it): the Host header names the
// host.
func (p *Proxy) serveTransparentHTTP(w http.ResponseWriter, r *http.Request, ci connInfo) {
	host, _, err := splitHostDefault(r.Host, ci.port)
	if err != nil || host == "" {
		p.refuse(w, refuseProtocol(egress.ViaHTTP, "", ci.port))
		return
	}
	if r.Method == http.MethodConnect {
		plainError(w, http.StatusMethodNotAllowed, "runtimectl egress: CONNECT goes to the proxy port (HTTPS_PROXY)")
		return
	}
	p.forwardHTTP(w, r, host, ci.port)
}

// forwardHTTP checks host:port and forwards the request there over plain HTTP.
func (p *Proxy) forwardHTTP(w http.ResponseWriter, r *http.Request, host string, port int) {
	if !p.allow.Allows(host, port) {
		p.refuse(w, refuseNotAllowed(p.words, egress.ViaHTTP, host, port, p.allow))
		return
	}
	ctx := context.WithValue(r.Context(), targetKey{}, target{scheme: "http", host: host, port: port, hostHeader: r.Host})
	p.forward.ServeHTTP(w, r.WithContext(ctx))
}

// serveTerminated forwards a request from inside TLS that the proxy terminated for a secret
// host: its Host must be that server name.
func (p *Proxy) serveTerminated(w http.ResponseWriter, r *http.Request, ci connInfo) {
	host, port, err := splitHostDefault(r.Host, ci.port)
	if err != nil || host != ci.host || port != ci.port {
		p.refuse(w, refuseMismatch(egress.ViaTLS, ci.host, ci.port, "the Host header", ci.host, r.Host))
		return
	}
	if r.Method == http.MethodConnect {
		plainError(w, http.StatusMethodNotAllowed, "runtimectl egress: CONNECT inside TLS")
		return
	}
	ctx := context.WithValue(r.Context(), targetKey{}, target{scheme: "https", host: ci.host, port: ci.port, hostHeader: r.Host})
	p.terminate.ServeHTTP(w, r.WithContext(ctx))
}

// target is where a request the handler allowed goes.
type target struct {
	scheme     string
	host       string
	port       int
	hostHeader string
}

type targetKey struct{}

// reverseProxy makes the forwarder of allowed requests: to the target the handler put in the
// request's context, with the secret headers of that host, over a transport that dials only
// addresses the session may reach.
func (p *Proxy) reverseProxy(via string, tlsConf *tls.Config) *httputil.ReverseProxy {
	tr := &http.Transport{
		DialContext:           p.dialer.dialContext(via),
		TLSClientConfig:       tlsConf,
		ForceAttemptHTTP2:     false,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       time.Minute,
		TLSHandshakeTimeout:   15 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme = t.scheme
			pr.Out.URL.Host = egress.HostPort(t.host, t.port)
			pr.Out.Host = t.hostHeader
			for _, s := range p.secretsFor(t.host, t.port) {
				pr.Out.Header.Set(s.header, s.value)
			}
		},
		Transport:      tr,
		FlushInterval:  -1, // stream: pip's progress, server-sent events
		ModifyResponse: p.redact,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var re *refusedError
			if errors.As(err, &re) {
				p.refuse(w, re.r)
				return
			}
			if errors.Is(err, context.Canceled) {
				return
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "runtimectl egress: ") {
				msg = "runtimectl egress: " + msg
			}
			plainError(w, http.StatusBadGateway, msg)
		},
		ErrorLog: nil,
	}
}

func (p *Proxy) secretsFor(host string, port int) []secret {
	var out []secret
	for _, s := range p.secrets {
		if s.rule.Matches(host) && s.rule.AllowsPort(port) {
			out = append(out, s)
		}
	}
	return out
}

// redact takes secret values out of a response's headers: an upstream that echoes a request's
// headers back (as an error page may) would hand the secret to the session.
func (p *Proxy) redact(resp *http.Response) error {
	t, _ := resp.Request.Context().Value(targetKey{}).(target)
	secrets := p.secretsFor(t.host, t.port)
	if len(secrets) == 0 {
		return nil
	}
	for k, vs := range resp.Header {
		for i, v := range vs {
			for _, s := range secrets {
				v = strings.ReplaceAll(v, s.value, "[redacted by runtimectl egress]")
			}
			resp.Header[k][i] = v
		}
	}
	resp.Body = newRedactor(resp.Body, secrets)
	resp.Header.Del("Content-Length") // redaction may change the length
	resp.ContentLength = -1
	return nil
}

// refuse counts and logs a refusal and answers the request with it: status 403 with the
// message as the status line's reason phrase (which tools print: pip, requests, git) and as
// the body.
func (p *Proxy) refuse(w http.ResponseWriter, r Refusal) {
	p.refused(r)
	writeStatus(w, http.StatusForbidden, r.Message)
}

// writeStatus answers with code and msg, msg also as the reason phrase (the connection is
// taken over to write it), and closes the connection.
func writeStatus(w http.ResponseWriter, code int, msg string) {
	body := msg + "\n"
	mark := ""
	if code == http.StatusForbidden {
		mark = "X-Runtimectl-Egress: refused\r\n"
	}
	if hj, ok := w.(http.Hijacker); ok {
		if c, bw, err := hj.Hijack(); err == nil {
			fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n%s",
				code, statusText(msg), len(body), mark, body)
			bw.Flush()
			c.Close()
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if mark != "" {
		w.Header().Set("X-Runtimectl-Egress", "refused")
	}
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// statusText makes msg fit a status line's reason phrase (no control characters).
func statusText(msg string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
}

func plainError(w http.ResponseWriter, code int, msg string) { writeStatus(w, code, msg) }

// splitHostDefault splits HOST[:PORT] (PORT defaulting to def) and normalizes HOST.
func splitHostDefault(hostport string, def int) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		// no port
		return egress.NormalizeHost(hostport), def, nil
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q in %q", p, hostport)
	}
	return egress.NormalizeHost(host), port, nil
}
