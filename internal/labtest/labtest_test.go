package labtest

import (
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// serve answers every connection on ln with size bytes.
func serve(ln net.Listener, size int) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = c.Write(make([]byte, size))
		}()
	}
}

// fetch reads everything addr sends, within limit.
func fetch(addr string, limit time.Duration) (int64, time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, limit)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(limit))
	n, err := io.Copy(io.Discard, c)
	return n, time.Since(start), err
}

// TestLab: two labs at once get their own ids, /24s and names within
// the kernel's 15 bytes; a host's address is reached over the bridge; a
// cut link carries nothing until it is restored; a slowed one carries its
// rate; and nothing of a lab is left once its test ends.
func TestLab(t *testing.T) {
	var id string
	t.Run("lab", func(t *testing.T) {
		lab, other := New(t, Options{Hosts: 2, NoTPM: true}), New(t, Options{Hosts: 1, NoTPM: true})
		id = lab.ID
		if lab.ID == other.ID || lab.Subnet.Overlaps(other.Subnet) {
			t.Fatalf("two labs share an id or addresses: %s %s, %s %s", lab.ID, lab.Subnet, other.ID, other.Subnet)
		}
		if !netip.MustParsePrefix("198.18.0.0/15").Contains(lab.Subnet.Addr()) || lab.Subnet.Bits() != 24 {
			t.Fatalf("subnet %s is not a /24 of 198.18.0.0/15", lab.Subnet)
		}
		for _, h := range append([]*Host{lab.FounderHost}, lab.Hosts...) {
			if len(h.Link) > 15 || len(lab.Bridge) > 15 || !lab.Subnet.Contains(h.IP) {
				t.Errorf("%s: link %q, bridge %q, address %s", h.Name, h.Link, lab.Bridge, h.IP)
			}
		}

		h := lab.Hosts[0]
		const size = 1 << 20
		go serve(h.Listen(t, "tcp", h.IP.String()+":7000"), size)
		addr := h.IP.String() + ":7000"
		if n, took, err := fetch(addr, 10*time.Second); err != nil || n != size {
			t.Fatalf("from %s: %d bytes in %v: %v", addr, n, took, err)
		}

		h.Cut(t)
		if n, _, err := fetch(addr, time.Second); err == nil {
			t.Fatalf("%d bytes crossed a cut link", n)
		}
		h.Restore(t)
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _, err := fetch(addr, 2*time.Second)
			if err == nil && n == size {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the restored link carries nothing: %d bytes: %v", n, err)
			}
		}

		// 1 MiB at 8 Mbit/s takes about a second.
		h.Slow(t, "8mbit", 16<<10, 200*time.Millisecond)
		if n, took, err := fetch(addr, 20*time.Second); err != nil || n != size || took < 700*time.Millisecond {
			t.Fatalf("1 MiB over a link slowed to 8 Mbit/s: %d bytes in %v: %v", n, took, err)
		}
		h.Unslow(t)
		if n, took, err := fetch(addr, 10*time.Second); err != nil || n != size || took > 700*time.Millisecond {
			t.Errorf("1 MiB once the link is no longer slowed: %d bytes in %v: %v", n, took, err)
		}
	})
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	ns, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out)+string(ns), id) {
		t.Errorf("lab %s left links or namespaces:\n%s\n%s", id, out, ns)
	}
}
