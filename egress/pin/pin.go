//go:build linux

// Package pin leaves a network namespace one way out: to one address, a session's egress proxy
// on Kubernetes. `runtime-egress pin ADDR` runs it in an init container of the session's pod
// (the only container of the pod with CAP_NET_ADMIN); once it has run, the session's code,
// which has no CAP_NET_ADMIN and no CAP_NET_RAW, cannot route a packet anywhere else: not to
// another pod, the node, an outside address, over UDP or IPv6. It is what holds where the
// cluster does not enforce NetworkPolicy (the local test cluster's bridge), and a second wall
// where it does.
package pin

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// in6AddrGenModeNone is IN6_ADDR_GEN_MODE_NONE (linux/if_link.h): the kernel makes no IPv6
// address for the link by itself.
const in6AddrGenModeNone = 1

// Probes are addresses (TEST-NET-1 and -2) that no pinned namespace reaches: Pin checks the
// first that is not the one it keeps.
var Probes = []string{"192.0.2.1", "198.51.100.1"}

// Pin removes every route of the main table (both families) and every address of the other
// family than addr's on links other than loopback, then adds the one route to addr that the
// kernel chose before (on the link, or through its gateway with onlink, so that the gateway
// itself gets no route). It returns what it kept, for the log.
func Pin(addr string) (string, error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return "", fmt.Errorf("pin: %q is not an IP address", addr)
	}
	bits, family, other := 32, netlink.FAMILY_V4, netlink.FAMILY_V6
	if ip.To4() == nil {
		bits, family, other = 128, netlink.FAMILY_V6, netlink.FAMILY_V4
	}
	via, err := netlink.RouteGet(ip)
	if err != nil || len(via) == 0 {
		return "", fmt.Errorf("pin: no route to %s: %v", ip, err)
	}
	keep := netlink.Route{LinkIndex: via[0].LinkIndex, Table: unix.RT_TABLE_MAIN,
		Dst: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}
	if via[0].Gw != nil {
		keep.Gw, keep.Flags = via[0].Gw, int(netlink.FLAG_ONLINK)
	} else {
		keep.Scope = netlink.SCOPE_LINK
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return "", fmt.Errorf("pin: list routes: %w", err)
		}
		for _, r := range routes {
			if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
				return "", fmt.Errorf("pin: delete route %s: %w", r, err)
			}
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		return "", fmt.Errorf("pin: list links: %w", err)
	}
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		if other == netlink.FAMILY_V6 {
			// No IPv6 address made from now on: a link-local one the kernel adds once the link
			// is up (and its fe80::/64 route) would come after the deletion below. An error is
			// a kernel without IPv6 on the link, which then has nothing to add.
			_ = netlink.LinkSetIP6AddrGenMode(l, in6AddrGenModeNone)
		}
		addrs, err := netlink.AddrList(l, other)
		if err != nil {
			return "", fmt.Errorf("pin: list addresses of %s: %w", l.Attrs().Name, err)
		}
		for _, a := range addrs {
			if err := netlink.AddrDel(l, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				return "", fmt.Errorf("pin: delete address %s of %s: %w", a.IPNet, l.Attrs().Name, err)
			}
		}
	}
	if err := netlink.RouteAdd(&keep); err != nil {
		return "", fmt.Errorf("pin: add the route to %s: %w", ip, err)
	}
	if family == netlink.FAMILY_V4 {
		probe := Probes[0]
		if ip.Equal(net.ParseIP(probe)) {
			probe = Probes[1]
		}
		if r, err := netlink.RouteGet(net.ParseIP(probe)); err == nil {
			return "", fmt.Errorf("pin: %s is still routed (%v)", probe, r)
		}
	}
	return keep.String(), nil
}
