package join

import (
	"net/netip"

	"stratum/apierr"
	"stratum/store"
)

// The management address goes into a CA-signed serverAuth leaf as its IP
// SAN (SPEC 10.5): whoever holds that leaf can answer for the address.
// So an address that is not a node's own unicast address is refused, and
// so is every address the cluster already answers on (its VIPs, the
// founder's addresses): a joiner must not get a certificate for them.

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// mgmtAddrProblem says why ip may not be a node's management address,
// or "" when it may.
func (s *Service) mgmtAddrProblem(tx *store.Tx, ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "not an IP address", nil
	}
	a = embeddedIPv4(a)
	switch {
	case a.IsLoopback() && !s.cfg.Dev:
		return "a loopback address names every host: give the node's own address (serve --dev allows loopback for a lab on one machine)", nil
	case a.IsUnspecified():
		return "the unspecified address is no host's address", nil
	case a.IsMulticast():
		return "a multicast address is no single host's address", nil
	case a.IsLinkLocalUnicast():
		return "a link-local address is not routable across the cluster", nil
	case a == limitedBroadcast:
		return "the broadcast address is no host's address", nil
	}
	id, err := s.decoded.Identity(tx)
	if err != nil {
		return "", err
	}
	v := id.VIPs
	for _, vip := range []string{v.API, v.Postgres, v.OpenBao, v.OvnNb, v.OvnSb, v.Vmselect, v.FloatingNextHop} {
		if sameAddr(vip, a) {
			return "it is one of the cluster's VIPs (" + vip + ")", nil
		}
	}
	founderAddrs := append([]string{}, s.cfg.FounderAddrs...)
	if f, found, err := s.decoded.Member(tx, id.FounderNodeID); err != nil {
		return "", err
	} else if found {
		founderAddrs = append(founderAddrs, f.MgmtIP)
	}
	for _, fa := range founderAddrs {
		// In a lab on one machine every process shares loopback.
		if sameAddr(fa, a) && !(s.cfg.Dev && a.IsLoopback()) {
			return "it is one of the founder's own addresses", nil
		}
	}
	return "", nil
}

func sameAddr(s string, a netip.Addr) bool {
	b, err := netip.ParseAddr(s)
	return err == nil && embeddedIPv4(b) == a
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// embeddedIPv4 is the IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d),
// IPv4-compatible (::a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address, and a
// itself otherwise (SPEC 16.10): the rules judge the address traffic
// reaches, whatever form names it.
func embeddedIPv4(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if !a.Is6() || a.Zone() != "" {
		return a
	}
	b := a.As16()
	compatible := [12]byte(b[:12]) == [12]byte{} && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback()
	if compatible || nat64.Contains(a) {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

// checkMgmtAddr refuses ip with a field error of code; "" passes.
func (s *Service) checkMgmtAddr(tx *store.Tx, ip string, code apierr.Code) error {
	if ip == "" {
		return nil
	}
	why, err := s.mgmtAddrProblem(tx, ip)
	if err != nil || why == "" {
		return err
	}
	return apierr.WithFields(code, "the management address "+ip+" cannot go into a node certificate", []apierr.FieldError{{Field: "mgmtIp", Message: why}})
}
