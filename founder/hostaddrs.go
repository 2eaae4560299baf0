package founder

import "net"

// hostAddrs are the founder host's own addresses; no joiner may be given
// a certificate for them (SPEC 10.5).
func hostAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}
