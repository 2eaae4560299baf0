package labtest

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"stratum/tpm"
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

// TestLabTPM: a host's TPM, reached from its namespace's socket, holds in
// NV (index 0x01c00002, where a TPM keeps its RSA EK certificate) the EK
// certificate the lab recorded, and that certificate is signed by the
// lab's manufacturer CA.
func TestLabTPM(t *testing.T) {
	lab := New(t, Options{Hosts: 1})
	h := lab.Hosts[0]
	tp, err := tpm.Open(h.TPM)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	const ekCertIndex = tpm2.TPMHandle(0x01c00002)
	pub, err := tpm2.NVReadPublic{NVIndex: ekCertIndex}.Execute(tp)
	if err != nil {
		t.Fatal(err)
	}
	contents, err := pub.NVPublic.Contents()
	if err != nil {
		t.Fatal(err)
	}
	var inNV []byte
	for off := uint16(0); off < contents.DataSize; {
		n := min(contents.DataSize-off, 512)
		rsp, err := tpm2.NVRead{
			AuthHandle: tpm2.AuthHandle{Handle: ekCertIndex, Name: pub.NVName, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: ekCertIndex, Name: pub.NVName},
			Size:       n, Offset: off,
		}.Execute(tp)
		if err != nil {
			t.Fatal(err)
		}
		inNV, off = append(inNV, rsp.Data.Buffer...), off+n
	}
	if !bytes.Equal(inNV, h.EKCert) || len(h.EKCertSHA256) != 64 {
		t.Fatalf("the TPM's EK certificate (%d bytes) differs from the one the lab recorded (%d bytes, sha256 %q)", len(inNV), len(h.EKCert), h.EKCertSHA256)
	}
	ek, err := x509.ParseCertificate(inNV)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(lab.EKIssuerCA)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s holds no PEM", lab.EKIssuerCA)
	}
	issuer, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := ek.CheckSignatureFrom(issuer); err != nil {
		t.Fatalf("the EK certificate is not signed by the lab's manufacturer CA: %v", err)
	}
}
