package founder

import (
	"crypto/tls"
	"net"
	"net/url"
	"time"

	"stratum/crypto"
)

// serverCertificate issues the listeners' certificate from the cluster CA
// at each start: the names a client may dial the founder by, and the
// founder URI SAN by which joiners and agents tell it from a member.
func serverCertificate(ca *crypto.CA, clusterID, hostname, mgmtIP string, now time.Time) (tls.Certificate, error) {
	dns := []string{"localhost"}
	if hostname != "" && hostname != "localhost" {
		dns = append(dns, hostname)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if ip := net.ParseIP(mgmtIP); ip != nil && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: dns, IPs: ips, URIs: []*url.URL{crypto.FounderURI(clusterID)}, Server: true, Validity: 90 * 24 * time.Hour}, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(append(leaf.CertPEM, ca.CertPEM()...), leaf.KeyPEM)
}

// joinTLS requires a client certificate of any issuer: the joiner's key
// pin is its identity, and the handshake proves it holds the key.
func joinTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12}
}

// adminTLS accepts bearer tokens, and client certificates issued by the
// cluster CA for the node endpoints.
func adminTLS(cert tls.Certificate, ca *crypto.CA) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
}
