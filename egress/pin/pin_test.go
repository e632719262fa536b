//go:build linux

package pin

import (
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread of its own in a new network namespace with one link, d0 (a veth whose peer d1 has no address), at
// 10.9.0.2/24 and 2001:db8::2/64, its default route through 10.9.0.1: a pod's network as the
// bridge plugin makes it. The thread is never reused (it stays locked when f returns).
func inNetns(t *testing.T, f func()) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root and a network namespace of its own")
	}
	require.Zero(t, os.Geteuid(), "run as root: it makes a network namespace")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		require.NoError(t, unix.Unshare(unix.CLONE_NEWNET))
		lo, err := netlink.LinkByName("lo")
		require.NoError(t, err)
		require.NoError(t, netlink.LinkSetUp(lo))
		require.NoError(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "d0"}, PeerName: "d1"}))
		d0, err := netlink.LinkByName("d0")
		require.NoError(t, err)
		d1, err := netlink.LinkByName("d1")
		require.NoError(t, err)
		require.NoError(t, netlink.LinkSetUp(d1))
		for _, a := range []string{"10.9.0.2/24", "2001:db8::2/64"} {
			addr, err := netlink.ParseAddr(a)
			require.NoError(t, err)
			addr.Flags = unix.IFA_F_NODAD
			require.NoError(t, netlink.AddrAdd(d0, addr))
		}
		require.NoError(t, netlink.LinkSetUp(d0))
		require.NoError(t, netlink.RouteAdd(&netlink.Route{LinkIndex: d0.Attrs().Index, Gw: net.ParseIP("10.9.0.1")}))
		f()
	}()
	<-done
}

func unreachable(t *testing.T, network, addr string) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err == nil {
		_, err = c.Write([]byte("x"))
		c.Close()
	}
	require.Error(t, err, "%s %s", network, addr)
	assert.ErrorIs(t, err, syscall.ENETUNREACH, "%s %s", network, addr)
}

// On the link: only the proxy's address is routed; the gateway, the subnet, outside addresses
// (TCP and UDP) and IPv6 are unreachable at once.
func TestPinLeavesOneRouteOnTheLink(t *testing.T) {
	inNetns(t, func() {
		kept, err := Pin("10.9.0.7")
		require.NoError(t, err)
		assert.Contains(t, kept, "10.9.0.7/32")
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		require.Len(t, routes, 1, "%v", routes)
		assert.Equal(t, "10.9.0.7/32", routes[0].Dst.String())
		assert.Nil(t, routes[0].Gw)
		r, err := netlink.RouteGet(net.ParseIP("10.9.0.7"))
		require.NoError(t, err)
		assert.Nil(t, r[0].Gw)
		d0, err := netlink.LinkByName("d0")
		require.NoError(t, err)
		v6, err := netlink.AddrList(d0, netlink.FAMILY_V6)
		require.NoError(t, err)
		assert.Empty(t, v6, "no IPv6 address is left")
		for _, a := range []string{"10.9.0.1:80", "10.9.0.3:80", "192.0.2.1:443", "[2001:db8::1]:80"} {
			unreachable(t, "tcp", a)
		}
		unreachable(t, "udp", "8.8.8.8:53")
		// loopback still works: the agent's resolver and relay listen there
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		c.Close()
	})
}

// Through a gateway (the proxy on another node): the route goes through it with onlink, and
// the gateway itself is not reachable.
func TestPinLeavesOneRouteThroughTheGateway(t *testing.T) {
	inNetns(t, func() {
		kept, err := Pin("10.20.0.5")
		require.NoError(t, err)
		assert.Contains(t, kept, "10.20.0.5/32")
		r, err := netlink.RouteGet(net.ParseIP("10.20.0.5"))
		require.NoError(t, err)
		assert.Equal(t, "10.9.0.1", r[0].Gw.String())
		unreachable(t, "tcp", "10.9.0.1:80")
		unreachable(t, "tcp", "10.20.0.6:80")
	})
}

// The proxy at the first probe address: the check takes the other.
func TestPinChecksAnotherAddressThanItKeeps(t *testing.T) {
	inNetns(t, func() {
		_, err := Pin(Probes[0])
		require.NoError(t, err)
		unreachable(t, "tcp", Probes[1]+":80")
	})
}

func TestPinRefusesWhatIsNotAnAddress(t *testing.T) {
	_, err := Pin("proxy.example")
	assert.ErrorContains(t, err, "not an IP address")
}
