package crypto

import (
	"bytes"
	stdcrypto "crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCAIssueLeaf(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("cl-abc12345", now)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("CA certificate is not a path-length-0 signing CA: %+v", ca.Cert)
	}
	if !strings.Contains(ca.Cert.Subject.CommonName, "cl-abc12345") {
		t.Errorf("CA CommonName %q does not name the cluster", ca.Cert.Subject.CommonName)
	}
	if ca.Cert.NotAfter.Before(now.AddDate(9, 11, 0)) {
		t.Errorf("CA expires %v, want about ten years", ca.Cert.NotAfter)
	}

	cases := []struct {
		name   string
		req    LeafRequest
		usages []x509.ExtKeyUsage // must verify for each
		not    []x509.ExtKeyUsage // must not verify for these
	}{
		{
			name:   "node transport leaf: client and server",
			req:    LeafRequest{CommonName: "n-abc12def", DNSNames: []string{"n-abc12def"}, IPs: []net.IP{net.ParseIP("192.0.2.12")}, Client: true, Server: true, Validity: 365 * 24 * time.Hour},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
		{
			name:   "founder server certificate",
			req:    LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost", "founder.lab"}, IPs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, Server: true, Validity: 90 * 24 * time.Hour},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			not:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name:   "founder join listener: Ed25519",
			req:    LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"}, Server: true, Validity: 90 * 24 * time.Hour, Ed25519: true},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			not:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name:   "client only",
			req:    LeafRequest{CommonName: "n-client01", Client: true, Validity: time.Hour},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			not:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := ca.Issue(tc.req, now)
			if err != nil {
				t.Fatal(err)
			}
			c := leaf.Cert
			if c.Subject.CommonName != tc.req.CommonName {
				t.Errorf("CommonName = %q, want %q", c.Subject.CommonName, tc.req.CommonName)
			}
			if strings.Join(c.DNSNames, ",") != strings.Join(tc.req.DNSNames, ",") {
				t.Errorf("DNSNames = %v, want %v", c.DNSNames, tc.req.DNSNames)
			}
			if len(c.IPAddresses) != len(tc.req.IPs) {
				t.Fatalf("IPs = %v, want %v", c.IPAddresses, tc.req.IPs)
			}
			for i, ip := range tc.req.IPs {
				if !c.IPAddresses[i].Equal(ip) {
					t.Errorf("IP %d = %v, want %v", i, c.IPAddresses[i], ip)
				}
			}
			if c.IsCA {
				t.Error("a leaf is a CA")
			}
			if d := c.NotAfter.Sub(now.Add(tc.req.Validity)); d < -time.Second || d > time.Second {
				t.Errorf("NotAfter = %v, want now+%v", c.NotAfter, tc.req.Validity)
			}
			if !c.NotBefore.Before(now) {
				t.Errorf("NotBefore %v is not before now (clock skew)", c.NotBefore)
			}
			if want := map[bool]x509.PublicKeyAlgorithm{false: x509.ECDSA, true: x509.Ed25519}[tc.req.Ed25519]; c.PublicKeyAlgorithm != want {
				t.Errorf("key algorithm %v, want %v", c.PublicKeyAlgorithm, want)
			}
			if !leaf.Key.Public().(interface {
				Equal(stdcrypto.PublicKey) bool
			}).Equal(c.PublicKey) {
				t.Error("the leaf key does not match the certificate")
			}
			parsed, err := ParseCertPEM(leaf.CertPEM)
			if err != nil || !bytes.Equal(parsed.Raw, c.Raw) {
				t.Errorf("CertPEM does not hold the certificate: %v", err)
			}
			k, err := ParseKeyPEM(leaf.KeyPEM)
			if err != nil || !k.Public().(interface {
				Equal(stdcrypto.PublicKey) bool
			}).Equal(c.PublicKey) {
				t.Errorf("KeyPEM does not hold the key: %v", err)
			}
			for _, u := range tc.usages {
				opts := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{u}, CurrentTime: now}
				if len(tc.req.DNSNames) > 0 {
					opts.DNSName = tc.req.DNSNames[len(tc.req.DNSNames)-1]
				}
				if _, err := c.Verify(opts); err != nil {
					t.Errorf("leaf does not verify against the CA pool for usage %v: %v", u, err)
				}
			}
			for _, ip := range tc.req.IPs {
				if err := c.VerifyHostname(ip.String()); err != nil {
					t.Errorf("leaf not valid for IP %v: %v", ip, err)
				}
			}
			for _, u := range tc.not {
				if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{u}, CurrentTime: now}); err == nil {
					t.Errorf("leaf verifies for usage %v it was not issued for", u)
				}
			}
			// Another CA's pool does not accept it.
			other, _ := NewCA("cl-other000", now)
			if _, err := c.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: now}); err == nil {
				t.Error("leaf verifies against another CA")
			}
		})
	}
}

func TestLoadCARoundTrip(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("cl-abc12345", now)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	// Extra blocks before the certificate are skipped.
	certPEM := append([]byte("-----BEGIN COMMENT-----\nAAAA\n-----END COMMENT-----\n"), ca.CertPEM()...)
	loaded, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Pin() != ca.Pin() || !loaded.Key.Equal(ca.Key) {
		t.Fatal("loaded CA differs from the original")
	}
	leaf, err := loaded.Issue(LeafRequest{CommonName: "x", DNSNames: []string{"x"}, Server: true, Validity: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "x", CurrentTime: now}); err != nil {
		t.Fatalf("leaf of the loaded CA does not verify under the original: %v", err)
	}
	if _, err := LoadCA([]byte("nope"), keyPEM); err == nil {
		t.Error("LoadCA accepted a non-PEM certificate")
	}
	if _, err := LoadCA(ca.CertPEM(), ca.CertPEM()); err == nil {
		t.Error("LoadCA accepted a certificate as its key")
	}
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edPEM, _ := MarshalKeyPEM(edKey)
	if _, err := LoadCA(ca.CertPEM(), edPEM); err == nil {
		t.Error("LoadCA accepted an ed25519 key")
	}
}

func TestPins(t *testing.T) {
	ca, _ := NewCA("cl-abc12345", time.Now())
	pin := SPKIPin(ca.Cert)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(pin) {
		t.Fatalf("pin %q is not sha256:<64 hex>", pin)
	}
	if ca.Pin() != pin {
		t.Errorf("CA.Pin() = %q, SPKIPin = %q", ca.Pin(), pin)
	}
	got, err := PublicKeyPin(&ca.Key.PublicKey)
	if err != nil || got != pin {
		t.Fatalf("PublicKeyPin = %q, %v; want %q", got, err, pin)
	}

	// The joiner's self-signed ed25519 certificate: pin of cert == pin of key.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "joiner"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kp, err := PublicKeyPin(pub)
	if err != nil || kp != SPKIPin(cert) {
		t.Fatalf("ed25519: PublicKeyPin %q != SPKIPin %q (%v)", kp, SPKIPin(cert), err)
	}
	if kp == pin {
		t.Fatal("two different keys have the same pin")
	}
	if _, err := PublicKeyPin("not a key"); err == nil {
		t.Error("PublicKeyPin accepted a string")
	}
}

func newDataKey(t *testing.T) *DataKey {
	t.Helper()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	k, err := NewDataKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDataKeySealOpen(t *testing.T) {
	k := newDataKey(t)
	ad := []byte("secrets/pg")
	for _, pt := range [][]byte{nil, []byte("x"), []byte("a longer secret value"), bytes.Repeat([]byte{7}, 70000)} {
		ct, err := k.Seal(pt, ad)
		if err != nil {
			t.Fatal(err)
		}
		if len(ct) != 24+len(pt)+16 {
			t.Errorf("sealed %d bytes into %d, want nonce+pt+tag = %d", len(pt), len(ct), 24+len(pt)+16)
		}
		got, err := k.Open(ct, ad)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("Open = %q, %v", got, err)
		}
	}
	ct1, _ := k.Seal([]byte("same"), ad)
	ct2, _ := k.Seal([]byte("same"), ad)
	if bytes.Equal(ct1, ct2) || bytes.Equal(ct1[:24], ct2[:24]) {
		t.Fatal("two seals of the same plaintext share a nonce")
	}
	if bytes.Contains(ct1, []byte("same")) {
		t.Fatal("ciphertext holds the plaintext")
	}
}

func TestDataKeyOpenRefuses(t *testing.T) {
	k := newDataKey(t)
	ad := []byte("secrets/pg")
	ct, _ := k.Seal([]byte("postgres password"), ad)
	flip := func(i int) []byte {
		c := append([]byte(nil), ct...)
		c[i] ^= 0x01
		return c
	}
	cases := []struct {
		name, want string
		key        *DataKey
		ct, ad     []byte
	}{
		{"nonce byte flipped", "does not open", k, flip(0), ad},
		{"ciphertext byte flipped", "does not open", k, flip(24), ad},
		{"tag byte flipped", "does not open", k, flip(len(ct) - 1), ad},
		{"truncated tag", "does not open", k, ct[:len(ct)-1], ad},
		{"other additional data", "does not open", k, ct, []byte("secrets/other")},
		{"no additional data", "does not open", k, ct, nil},
		{"other key", "does not open", newDataKey(t), ct, ad},
		{"short: empty", "too short", k, nil, ad},
		{"short: nonce only", "too short", k, ct[:24], ad},
		{"short: one below minimum", "too short", k, ct[:24+15], ad},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := tc.key.Open(tc.ct, tc.ad)
			if err == nil {
				t.Fatalf("Open succeeded: %q", pt)
			}
			if pt != nil {
				t.Errorf("Open returned bytes with its error: %q", pt)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "postgres password") {
				t.Error("error leaks the plaintext")
			}
		})
	}
}

func TestNewDataKeyLength(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := NewDataKey(make([]byte, n)); err == nil {
			t.Errorf("NewDataKey accepted %d bytes", n)
		}
	}
	raw := make([]byte, 32)
	k, err := NewDataKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := k.Seal([]byte("v"), nil)
	raw[0] = 1 // the key must be a copy
	if _, err := k.Open(ct, nil); err != nil {
		t.Fatal("NewDataKey kept a reference to the caller's slice")
	}
}

func TestLoadOrCreateDataKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data.key")

	if _, err := LoadOrCreateDataKey(path, false); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing key with create=false = %v, want an error naming %s", err, path)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("create=false created the key")
	}

	k1, err := LoadOrCreateDataKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Fatalf("data.key mode %v size %d, want 0600 and 32 bytes", st.Mode().Perm(), st.Size())
	}
	ct, _ := k1.Seal([]byte("v"), []byte("ad"))

	// create=true on an existing key loads it, never replaces it.
	for _, create := range []bool{true, false} {
		k2, err := LoadOrCreateDataKey(path, create)
		if err != nil {
			t.Fatal(err)
		}
		if pt, err := k2.Open(ct, []byte("ad")); err != nil || string(pt) != "v" {
			t.Fatalf("reloaded key (create=%v) does not open what the first sealed: %v", create, err)
		}
	}

	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateDataKey(path, true); err == nil || !strings.Contains(err.Error(), "5 bytes") {
		t.Fatalf("a 5-byte key file = %v, want an error naming its size", err)
	}
}

func TestPasswords(t *testing.T) {
	h := HashPassword("hunter2-hunter2")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=2,p=2$") {
		t.Fatalf("hash %q is not an argon2id encoding", h)
	}
	if strings.Contains(h, "hunter2") {
		t.Fatal("hash holds the password")
	}
	if h2 := HashPassword("hunter2-hunter2"); h2 == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	cases := []struct {
		password, hash string
		ok, err        bool
	}{
		{"hunter2-hunter2", h, true, false},
		{"hunter2-hunter3", h, false, false},
		{"", h, false, false},
		{"HUNTER2-HUNTER2", h, false, false},
		{"hunter2-hunter2", "", false, true},
		{"hunter2-hunter2", "$2a$10$bcrypt", false, true},
		{"hunter2-hunter2", "$argon2id$v=19$m=x$salt$key", false, true},
		{"hunter2-hunter2", strings.Replace(h, "$m=", "$m=1", 1)[:len(h)-3] + "!!!", false, true},
	}
	for i, tc := range cases {
		ok, err := CheckPassword(tc.password, tc.hash)
		if ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("case %d: CheckPassword(%q, %q) = %v, %v; want %v, err=%v", i, tc.password, tc.hash, ok, err, tc.ok, tc.err)
		}
	}
}

func TestTokens(t *testing.T) {
	tok := "sat1.tok-abc.secret"
	h := HashToken(tok)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h) || strings.Contains(h, "secret") {
		t.Fatalf("HashToken = %q", h)
	}
	cases := []struct {
		token, hash string
		want        bool
	}{
		{tok, h, true},
		{tok + "x", h, false},
		{"", h, false},
		{tok, "", false},
		{tok, strings.ToUpper(h), false},
		{tok, h[:63], false},
		{"", HashToken(""), true},
	}
	for _, tc := range cases {
		if got := TokenMatches(tc.token, tc.hash); got != tc.want {
			t.Errorf("TokenMatches(%q, %q) = %v, want %v", tc.token, tc.hash, got, tc.want)
		}
	}
}

func TestRandomValues(t *testing.T) {
	idRe := regexp.MustCompile(`^n-[a-z0-9]{8}$`)
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		id := RandomID("n-", 8)
		if !idRe.MatchString(id) {
			t.Fatalf("RandomID = %q", id)
		}
		if seen[id] {
			t.Fatalf("RandomID repeated %q", id)
		}
		seen[id] = true
	}
	if id := RandomID("cl-", 0); id != "cl-" {
		t.Errorf("RandomID n=0 = %q", id)
	}
	// Every character of the alphabet shows up (no bias that drops one).
	chars := map[rune]bool{}
	for id := range seen {
		for _, r := range id[2:] {
			chars[r] = true
		}
	}
	if len(chars) != 36 {
		t.Errorf("RandomID used %d distinct characters, want 36", len(chars))
	}

	pw := RandomPassword(24)
	if !regexp.MustCompile(`^[A-HJ-NP-Za-km-z2-9]{24}$`).MatchString(pw) {
		t.Errorf("RandomPassword = %q", pw)
	}
	if s := RandomSecret(20); !regexp.MustCompile(`^[A-Za-z0-9_-]{27}$`).MatchString(s) {
		t.Errorf("RandomSecret(20) = %q, want 27 base64url characters", s)
	}
	if s := RandomHex(32); !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(s) {
		t.Errorf("RandomHex(32) = %q", s)
	}
	s1, s2, h1, h2 := RandomSecret(20), RandomSecret(20), RandomHex(16), RandomHex(16)
	if s1 == s2 || h1 == h2 {
		t.Error("random values repeat")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		mode os.FileMode
		data string
	}{
		{"secret.txt", 0o600, "password=x\n"},
		{"ca.pem", 0o644, "-----BEGIN CERTIFICATE-----\n"},
		{"secret.txt", 0o640, "overwritten\n"}, // replaces the first, mode included
		{"empty", 0o600, ""},
	}
	for _, tc := range cases {
		path := filepath.Join(dir, tc.name)
		if err := WriteFileAtomic(path, []byte(tc.data), tc.mode); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != tc.mode {
			t.Errorf("%s mode = %v, want %v", tc.name, st.Mode().Perm(), tc.mode)
		}
		if b, _ := os.ReadFile(path); string(b) != tc.data {
			t.Errorf("%s = %q, want %q", tc.name, b, tc.data)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
	if len(entries) != 3 {
		t.Errorf("dir has %d entries, want 3", len(entries))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600); err == nil {
		t.Error("WriteFileAtomic into a missing directory succeeded")
	}
}
