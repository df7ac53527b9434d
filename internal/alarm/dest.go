package alarm

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/delayq/delayq"
)

// Where events may go. An alarm's URL is set by any token with the
// alarm scope, and the server POSTs to it from inside the network it
// runs in: without a rule, a webhook is a way to reach what only the
// server can reach (its own API on loopback, a cloud's metadata service
// at 169.254.169.254, the services of a private network). So events go
// only to public addresses, unless the operator names other networks
// (Config.AllowNets, --webhook-allow-nets). The rule is checked where
// the connection is made, on the address actually dialled (a
// net.Dialer Control function), so a name that resolves to a public
// address when the alarm is created and to 127.0.0.1 when an event is
// sent (DNS rebinding) is refused all the same; the check when an alarm
// is created only gives an early, clear error for an address written in
// the URL itself. Redirects are not followed (a receiver answering 3xx
// could send the event, its signature and its headers anywhere), and no
// proxy from the environment is used (the check would see the proxy's
// address, not the receiver's).

// refusedNets are special-purpose ranges besides those netip.Addr's
// methods name (loopback, private, link-local, multicast, unspecified).
var refusedNets = []struct {
	net  netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},          // 0.0.0.0 reaches the local host on Linux
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},    // carrier-grade NAT; some clouds' metadata (100.100.100.200)
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},      // protocol assignments
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},      // network interconnect tests
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},            // and 255.255.255.255
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local NAT64"},      // RFC 8215
	{netip.MustParsePrefix("100::/64"), "discard-only"},           // RFC 6666
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},     // never routed
	{netip.MustParsePrefix("fec0::/10"), "site-local (obsolete)"}, // private in all but name
}

// embedded are IPv6 ranges that carry an IPv4 address a gateway
// forwards to: each is checked by the address it embeds, so
// 64:ff9b::7f00:1 is 127.0.0.1.
var embedded = []struct {
	net netip.Prefix
	at  int // byte offset of the IPv4 address
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12}, // NAT64 (RFC 6052)
	{netip.MustParsePrefix("2002::/16"), 2},     // 6to4
}

// kindOf names what makes ip a refused destination, or "" for a public
// unicast address.
func kindOf(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	for _, e := range embedded {
		if e.net.Contains(ip) {
			b := ip.As16()
			if k := kindOf(netip.AddrFrom4([4]byte(b[e.at : e.at+4]))); k != "" {
				return k + " (embedded in " + ip.String() + ")"
			}
		}
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsPrivate():
		return "private"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, r := range refusedNets {
		if r.net.Contains(ip) {
			return r.kind
		}
	}
	return ""
}

// destPolicy decides which addresses events may be sent to.
type destPolicy struct {
	allow []netip.Prefix
}

// check refuses ip unless it is public or in an allowed network.
func (p destPolicy) check(ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	for _, n := range p.allow {
		if n.Contains(ip) {
			return nil
		}
	}
	if k := kindOf(ip); k != "" {
		return fmt.Errorf("%s is a %s address, and events are sent only to public addresses unless --webhook-allow-nets names the network", ip, k)
	}
	return nil
}

// checkURL refuses a URL whose host is written as a refused address (or
// is localhost), for a clear error when the alarm is created. A name is
// not resolved here: what it resolves to when an event is sent is what
// counts, and the dialer checks that.
func (p destPolicy) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // FromRequest has refused it already
	}
	host := u.Hostname()
	ip, err := netip.ParseAddr(host)
	if err != nil {
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if h != "localhost" && !strings.HasSuffix(h, ".localhost") {
			return nil
		}
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1}) // RFC 6761: always loopback
	}
	if err := p.check(ip); err != nil {
		return delayq.Invalid(delayq.CodeBadURL, "url", "%s: %v", clip(host), err)
	}
	return nil
}

// control is the dialer's Control function: it runs after the name is
// resolved and before each connection attempt, on the address dialled.
func (p destPolicy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("alarm: unexpected dial address %q: %w", address, err)
	}
	return p.check(ap.Addr())
}

// newClient is the client events are sent with: every connection checked
// by p, no proxy, no redirect followed.
func newClient(p destPolicy) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}).DialContext
	return &http.Client{Transport: t, CheckRedirect: noRedirects}
}

// noRedirects hands a 3xx answer back as it is: post reports it as a
// failure naming the status.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
