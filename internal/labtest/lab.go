package labtest

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"stratum/internal/stratumtest"
)

// Options shape a lab.
type Options struct {
	// Hosts is the number of node hosts (at most MaxHosts).
	Hosts int
	// NoTPM leaves the hosts without software TPMs (a lab that only
	// needs addresses starts faster).
	NoTPM bool
}

// MaxHosts is the most node hosts a lab's /24 holds: .1 is the founder,
// .254 the bridge (the test process's own address in the lab).
const MaxHosts = 252

// Lab is a bridge, the founder's namespace and one namespace per host.
type Lab struct {
	// ID is the lab's short unique id, in every name it makes.
	ID string
	// Subnet is the lab's /24 in 198.18.0.0/15; Gateway is the bridge's
	// address in it, by which this process reaches every host.
	Subnet  netip.Prefix
	Gateway netip.Addr
	Bridge  string
	// Dir holds the hosts' roots, state and TPMs (short: unix socket
	// paths are capped at 108 bytes).
	Dir string
	// FounderHost is the founder's namespace; Hosts the node hosts.
	FounderHost *Host
	Hosts       []*Host
	// EKRootCA and EKIssuerCA are the PEM files of the lab's TPM
	// manufacturer: every host's EK certificate chains to them.
	EKRootCA, EKIssuerCA string

	t       testing.TB
	mu      sync.Mutex
	founder *stratumtest.Founder
	fopts   stratumtest.FounderOptions
}

// Host is a network namespace on the lab's bridge: a machine of the rack.
type Host struct {
	Name string     // host name, rack-001
	NS   string     // network namespace
	Link string     // its veth's end on the bridge (in this process's namespace)
	IP   netip.Addr // its address, on eth0 inside NS
	// NodeID is the node id the rack assigns it.
	NodeID string
	// Dir holds Root (the node's file system), State (the joiner's state
	// dir) and the TPM's state.
	Dir, Root, State string
	// TPM is its software TPM's socket ("" without one); EKCert its RSA
	// EK certificate (DER) and EKCertSHA256 that certificate's SHA-256
	// (hex), as an inventory names the machine.
	TPM          string
	EKCert       []byte
	EKCertSHA256 string
	// KeyFingerprint is its joiner's registration key's fingerprint
	// (sha256:<hex>), the key made in State before the joiner starts.
	KeyFingerprint string
}

// Wrap is the command prefix that runs a program on the host.
func (h *Host) Wrap() []string { return []string{"ip", "netns", "exec", h.NS} }

// New makes a lab of o.Hosts hosts, or skips the test when it cannot be
// made here (not root, no iproute2). It is removed when the test ends.
func New(t testing.TB, o Options) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("labtest: the lab makes network namespaces and links: run as root")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("labtest: %s not found: install iproute2", tool)
		}
	}
	if o.Hosts < 0 || o.Hosts > MaxHosts {
		t.Fatalf("labtest: %d hosts: a lab holds 0 to %d", o.Hosts, MaxHosts)
	}
	if !o.NoTPM && o.Hosts > 0 {
		for _, tool := range []string{"swtpm", "swtpm_setup", "swtpm_localca"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("labtest: %s not found: apt-get install swtpm swtpm-tools", tool)
			}
		}
	}
	sweep(t)
	l := &Lab{t: t, ID: newID()}
	index, err := claim(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(l.ID) })
	base := netip.AddrFrom4([4]byte{198, 18 + byte(index/256), byte(index % 256), 0})
	l.Subnet = netip.PrefixFrom(base, 24)
	l.Gateway = hostAddr(base, 254)
	l.Bridge = "stlb" + l.ID
	if l.Dir, err = os.MkdirTemp("", "stl"+l.ID+"-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(l.Dir) })
	// Links and namespaces go after every process of the lab has been
	// stopped (cleanups run last-registered first).
	t.Cleanup(func() { l.teardown() })
	if err := ipBatch("link add "+l.Bridge+" type bridge",
		"addr add "+l.Gateway.String()+"/24 dev "+l.Bridge,
		"link set "+l.Bridge+" up"); err != nil {
		t.Fatal(err)
	}
	l.FounderHost = l.addHost(t, "f", "founder", hostAddr(base, 1))
	for i := range o.Hosts {
		h := l.addHost(t, fmt.Sprintf("%03d", i+1), fmt.Sprintf("rack-%03d", i+1), hostAddr(base, byte(i+2)))
		h.NodeID = fmt.Sprintf("n-rack%04d", i+1)
		l.Hosts = append(l.Hosts, h)
	}
	if !o.NoTPM && len(l.Hosts) > 0 {
		l.startTPMs(t)
	}
	t.Logf("lab %s: bridge %s, %s, founder %s, %d hosts, in %s", l.ID, l.Bridge, l.Subnet, l.FounderHost.IP, len(l.Hosts), l.Dir)
	return l
}

// addHost makes the namespace stl<ID>-<n> with eth0 (addr/24, up) wired
// to the bridge through the veth stlv<ID><n>, and lo up.
func (l *Lab) addHost(t testing.TB, n, name string, addr netip.Addr) *Host {
	t.Helper()
	h := &Host{Name: name, NS: "stl" + l.ID + "-" + n, Link: "stlv" + l.ID + n, IP: addr, Dir: filepath.Join(l.Dir, n)}
	h.Root, h.State = filepath.Join(h.Dir, "root"), filepath.Join(h.Dir, "state")
	for _, d := range []string{h.Root, h.State} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := ipBatch("netns add "+h.NS,
		"link add "+h.Link+" type veth peer name eth0 netns "+h.NS,
		"link set "+h.Link+" master "+l.Bridge+" up"); err != nil {
		t.Fatal(err)
	}
	if err := ipBatch("-n", h.NS, "addr add "+addr.String()+"/24 dev eth0",
		"link set eth0 up",
		"link set lo up"); err != nil {
		t.Fatal(err)
	}
	return h
}

func hostAddr(base netip.Addr, last byte) netip.Addr {
	b := base.As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// Host is the host named name (rack-001), or nil.
func (l *Lab) Host(name string) *Host {
	for _, h := range l.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// teardown deletes the lab's namespaces and bridge (a namespace's veth
// goes with it).
func (l *Lab) teardown() {
	if err := removeLab(l.ID); err != nil {
		l.t.Errorf("labtest: removing lab %s: %v", l.ID, err)
	}
}

// newID is 5 characters of [a-z0-9]: short enough for interface names
// (15 bytes: stlv + id + 3 digits).
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// ownerDir holds one file per lab: its owner's pid and start time and its
// subnet index. /run is cleared at boot, as namespaces are.
const ownerDir = "/run/stratum-lab"

// claim records this process as lab id's owner and picks a /24 of
// 198.18.0.0/15 no other live lab holds, under a lock.
func claim(id string) (int, error) {
	unlock, err := lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	used := map[int]bool{}
	entries, _ := os.ReadDir(ownerDir)
	for _, e := range entries {
		if o, ok := readOwner(e.Name()); ok {
			used[o.subnet] = true
		}
	}
	addrs, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for _, f := range strings.Fields(string(addrs)) {
		if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() {
			if b := p.Addr().As4(); b[0] == 198 && (b[1] == 18 || b[1] == 19) {
				used[int(b[1]-18)*256+int(b[2])] = true
			}
		}
	}
	var buf [2]byte
	_, _ = rand.Read(buf[:])
	start := int(buf[0])<<8 | int(buf[1])
	for i := range 512 {
		idx := (start + i) % 512
		if !used[idx] {
			self := processStart(os.Getpid())
			rec := fmt.Sprintf("%d %s %d\n", os.Getpid(), self, idx)
			return idx, os.WriteFile(filepath.Join(ownerDir, id), []byte(rec), 0o644)
		}
	}
	return 0, fmt.Errorf("labtest: every /24 of 198.18.0.0/15 is taken")
}

func release(id string) { _ = os.Remove(filepath.Join(ownerDir, id)) }

// lock takes ownerDir/.lock (flock) and answers its release.
func lock() (func(), error) {
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(ownerDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

type owner struct {
	pid    int
	start  string
	subnet int
}

// readOwner reads lab id's owner; ok is false when there is none or it
// has exited (a pid reused by another process has another start time).
func readOwner(id string) (owner, bool) {
	raw, err := os.ReadFile(filepath.Join(ownerDir, id))
	if err != nil {
		return owner{}, false
	}
	p := strings.Fields(string(raw))
	if len(p) != 3 {
		return owner{}, false
	}
	var o owner
	o.pid, _ = strconv.Atoi(p[0])
	o.start = p[1]
	o.subnet, _ = strconv.Atoi(p[2])
	if o.pid <= 0 || processStart(o.pid) != o.start {
		return o, false
	}
	return o, true
}

// processStart is pid's start time (field 22 of /proc/PID/stat), "" when
// it does not run.
func processStart(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	rest := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
