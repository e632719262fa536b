package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/egress"
)

// dialTimeout bounds one connection attempt upstream.
const dialTimeout = 10 * time.Second

// refusedError is a dial refused by the address checks; the caller tells the session.
type refusedError struct{ r Refusal }

func (e *refusedError) Error() string { return e.r.Message }

// dialer resolves names and dials upstream, refusing addresses the session may not reach.
type dialer struct {
	session string
	words   words
	allow   egress.Allowlist
	hosts   map[string][]netip.Addr
	deny    []netip.Prefix // the controller's, the proxy's gateways and own addresses
	lookup  func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// forbidden says why addr is refused ("" when it is not), before the allowlist's say.
func (d *dialer) forbidden(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case addr.IsLoopback():
		return "loopback"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "link-local"
	case addr.IsUnspecified(), addr.IsMulticast(), addr.IsInterfaceLocalMulticast(), addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "not a host"
	case addr.Is4() && addr.As4()[0] == 0:
		return "not a host"
	}
	for _, p := range d.deny {
		if p.Contains(addr) {
			return "the engine's host"
		}
	}
	return ""
}

// resolve returns the addresses of host (a name or a literal address).
func (d *dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, ok := egress.ParseAddr(host); ok {
		return []netip.Addr{a}, nil
	}
	if addrs, ok := d.hosts[host]; ok {
		return addrs, nil
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("runtimectl egress: %s does not resolve: %v", host, err)
	}
	return addrs, nil
}

// check resolves host and keeps the addresses the session may reach on port; a refusal when
// none is left.
func (d *dialer) check(ctx context.Context, via, host string, port int) ([]netip.Addr, error) {
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var ok []netip.Addr
	var first netip.Addr
	var why string
	for _, a := range addrs {
		a = a.Unmap()
		if w := d.forbidden(a); w != "" && !d.allow.AllowsAddr(a, port) {
			if why == "" {
				first, why = a, w
			}
			continue
		}
		ok = append(ok, a)
	}
	if len(ok) == 0 {
		if why == "" {
			return nil, fmt.Errorf("runtimectl egress: %s has no address", host)
		}
		return nil, &refusedError{refuseAddress(d.words, via, host, port, first.String(), why)}
	}
	return ok, nil
}

// connect dials host on port at the first of its checked addresses that answers.
func (d *dialer) connect(ctx context.Context, via, host string, port int) (net.Conn, error) {
	addrs, err := d.check(ctx, via, host, port)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		c, err := d.dialOne(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("runtimectl egress: cannot reach %s: %w", egress.HostPort(host, port), errors.Join(errs...))
}

func (d *dialer) dialOne(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return d.dial(ctx, "tcp", ap.String())
}

// dialContext is the dialer for http.Transport: addr is HOST:PORT as the request named it,
// already allowed by the handler.
func (d *dialer) dialContext(via string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		return d.connect(ctx, via, egress.NormalizeHost(host), port)
	}
}

// systemLookup resolves with the system's resolver (the proxy's container's).
func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// ownAddresses are the proxy's own interface addresses and its gateways (the engine's host on
// a bridge, the node on Kubernetes): refused like loopback.
func ownAddresses() []netip.Prefix {
	var out []netip.Prefix
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					ip = ip.Unmap()
					out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
				}
			}
		}
	}
	for _, g := range gateways() {
		out = append(out, netip.PrefixFrom(g, g.BitLen()))
	}
	return out
}

// gateways reads the default and other gateways of the proxy's routes from /proc (Linux; none
// elsewhere).
func gateways() []netip.Addr {
	var out []netip.Addr
	if f, err := os.Open("/proc/net/route"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 || fs[0] == "Iface" {
				continue
			}
			v, err := strconv.ParseUint(fs[2], 16, 32)
			if err != nil || v == 0 {
				continue
			}
			// the field is the address in host (little-endian) order
			out = append(out, netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}))
		}
		f.Close()
	}
	if f, err := os.Open("/proc/net/ipv6_route"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 5 || len(fs[4]) != 32 {
				continue
			}
			var b [16]byte
			ok := true
			for i := range 16 {
				v, err := strconv.ParseUint(fs[4][2*i:2*i+2], 16, 8)
				if err != nil {
					ok = false
					break
				}
				b[i] = byte(v)
			}
			if a := netip.AddrFrom16(b); ok && !a.IsUnspecified() {
				out = append(out, a)
			}
		}
		f.Close()
	}
	return out
}
