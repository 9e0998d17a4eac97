package apihook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// AllowKey is the configuration key of the allowlist, for messages.
const AllowKey = "cluster.api_hook.allow"

// Policy says where api_hooks may be sent. Rules and their URLs come from
// whoever may apply an EventRule, and the cluster sends from inside the
// network, so without a policy an api_hook reaches what only the cluster
// can: its own loopback services, the cloud metadata endpoint, the
// link-local network.
//
// A destination is refused
//   - when its address is loopback, link-local (the cloud metadata address
//     169.254.169.254 among them), unspecified or multicast, unless an
//     address or CIDR entry of the allowlist contains it;
//   - when the allowlist is not empty and the destination matches none of
//     its entries.
//
// Entries are an IP address or CIDR ("10.1.0.0/16", "127.0.0.1"), matched
// against the address actually dialled; a host name ("hooks.example.com"),
// matched against the URL's host; or a URL prefix
// ("https://hooks.example.com/unyo/"), matched against the URL. Host and
// URL entries never allow a restricted address: that takes an address or
// CIDR entry, so that a listed name whose DNS answer changes to 127.0.0.1
// is still refused.
//
// Addresses are checked when the connection is made, on the address
// dialled (a net.Dialer Control function), so DNS answers that change
// between a check and the dial (DNS rebinding) cannot get past. Redirects
// are never followed and no proxy is used.
type Policy struct {
	prefixes []netip.Prefix
	hosts    []string
	urls     []string
}

// ParsePolicy reads the allowlist entries; nil or empty is the default
// policy.
func ParsePolicy(entries []string) (*Policy, error) {
	p := &Policy{}
	var errs []error
	for i, e := range entries {
		e = strings.TrimSpace(e)
		if err := p.add(e); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", AllowKey, i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Policy) add(e string) error {
	switch {
	case e == "":
		return errors.New("is empty (expected an IP address, a CIDR, a host name or a URL prefix)")
	case strings.Contains(e, "://"):
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is not an http or https URL prefix", e)
		}
		if u.User != nil {
			return fmt.Errorf("%q: a URL prefix must not carry credentials", e)
		}
		p.urls = append(p.urls, e)
	case strings.Contains(e, "/"):
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("%q is not a valid CIDR: %w", e, err)
		}
		p.prefixes = append(p.prefixes, pfx.Masked())
	default:
		if ip, err := netip.ParseAddr(e); err == nil {
			ip = ip.Unmap()
			p.prefixes = append(p.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			return nil
		}
		if strings.ContainsAny(e, " :?#@") {
			return fmt.Errorf("%q is neither an IP address, a CIDR, a host name nor an http(s) URL prefix", e)
		}
		p.hosts = append(p.hosts, strings.ToLower(strings.TrimSuffix(e, ".")))
	}
	return nil
}

// DestinationError is why a destination was refused; it is not retried.
type DestinationError struct {
	// Addr is the address refused (the dialled IP), or the URL's host when
	// the URL alone was refused.
	Addr string
	// Rule is the policy rule that refused it, in words.
	Rule string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("destination %s refused: %s", e.Addr, e.Rule)
}

// restricted names what kind of address ip is when api_hooks may reach it
// only by an explicit address or CIDR entry; "" for any other address.
func restricted(ip netip.Addr) string {
	switch {
	case ip == netip.AddrFrom4([4]byte{169, 254, 169, 254}) || ip == netip.MustParseAddr("fd00:ec2::254"):
		return "the cloud metadata address"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast():
		return "a link-local address"
	case ip.IsUnspecified():
		return "the unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	}
	return ""
}

func (p *Policy) empty() bool {
	return p == nil || len(p.prefixes)+len(p.hosts)+len(p.urls) == 0
}

func (p *Policy) inPrefixes(ip netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// named reports whether a host or URL entry lists u.
func (p *Policy) named(u *url.URL) bool {
	if p == nil {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, h := range p.hosts {
		if h == host {
			return true
		}
	}
	s := u.String()
	for _, pre := range p.urls {
		if strings.HasPrefix(s, pre) {
			return true
		}
	}
	return false
}

// checkIP decides one dialled address; named says whether a host or URL
// entry listed the request's URL.
func (p *Policy) checkIP(ip netip.Addr, named bool) error {
	ip = ip.Unmap()
	if what := restricted(ip); what != "" {
		if p.inPrefixes(ip) {
			return nil
		}
		return &DestinationError{Addr: ip.String(), Rule: fmt.Sprintf("%s is refused unless %s lists it (as %s)", what, AllowKey, singlePrefix(ip))}
	}
	if p.empty() || named || p.inPrefixes(ip) {
		return nil
	}
	return &DestinationError{Addr: ip.String(), Rule: fmt.Sprintf("%s lists neither the URL, its host nor this address", AllowKey)}
}

func singlePrefix(ip netip.Addr) string {
	return netip.PrefixFrom(ip, ip.BitLen()).String()
}

// namedKey carries, from the request to its dial, whether the URL was named.
type namedKey struct{}

// NewClient returns the HTTP client api_hooks are sent with under p (nil:
// the default policy). It dials only addresses p allows, follows no
// redirects, uses no proxy and keeps no idle connections, so that every
// delivery is dialled, and checked, afresh.
func NewClient(p *Policy) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DisableKeepAlives:   true,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			named, _ := ctx.Value(namedKey{}).(bool)
			d := &net.Dialer{
				Timeout: 30 * time.Second,
				Control: func(_, address string, _ syscall.RawConn) error {
					ap, err := netip.ParseAddrPort(address)
					if err != nil {
						return fmt.Errorf("cannot check the address %s: %w", address, err)
					}
					return p.checkIP(ap.Addr(), named)
				},
			}
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{
		Transport: &policyTransport{p: p, next: tr},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// policyTransport marks each request with whether its URL is named, for
// the dial's check.
type policyTransport struct {
	p    *Policy
	next http.RoundTripper
}

func (t *policyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := context.WithValue(r.Context(), namedKey{}, t.p.named(r.URL))
	return t.next.RoundTrip(r.WithContext(ctx))
}
