package joiner

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"stratum/internal/hostmem"
	"stratum/osrelease"
)

// machineID is the machine's systemd machine id (<root>/etc/machine-id,
// 32 hex digits), the identifier an operator can check against the box.
// Without one (an installer environment, a container) it is derived from
// the identity key's fingerprint: stable across restarts, since the key
// is, and unique per joiner.
func machineID(root, fingerprint string) string {
	b, err := os.ReadFile(filepath.Join(root, "etc", "machine-id"))
	if err == nil {
		id := strings.TrimSpace(string(b))
		if isHex(id) && len(id) == 32 {
			return id
		}
	}
	sum := sha256.Sum256([]byte("stratum-joiner-machine-id\x00" + fingerprint))
	return hex.EncodeToString(sum[:16])
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// defaultMgmtIP is the local address this machine uses to reach the
// founder: the management address as the network sees it. A UDP "dial"
// sends nothing; it only asks the kernel for the route's source address.
// Empty when it cannot be known (the founder then records none, and the
// operator gives one at approval).
func defaultMgmtIP(founder string) string {
	c, err := net.Dial("udp", founder)
	if err != nil {
		return ""
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP != nil && !a.IP.IsUnspecified() {
		return a.IP.String()
	}
	return ""
}

// gatherFacts is what the operator sees next to the registration before
// approving it: enough to tell machines apart and spot a wrong one, at a
// few hundred bytes (the founder allows 64 KiB).
func gatherFacts(root string) map[string]any {
	f := map[string]any{
		"arch": runtime.GOARCH,
		"os":   runtime.GOOS,
		"cpus": runtime.NumCPU(),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		f["kernel"] = strings.TrimSpace(string(b))
	}
	if mem := hostmem.Total(); mem > 0 {
		f["memoryBytes"] = mem
	}
	if osr, _ := osrelease.Read(root); osr["PRETTY_NAME"] != "" {
		f["osRelease"] = osr["PRETTY_NAME"]
	}
	var addrs []string
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				addrs = append(addrs, ipn.String())
			}
		}
	}
	if len(addrs) > 0 {
		f["addresses"] = addrs
	}
	return f
}
