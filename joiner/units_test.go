package joiner

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/semver"
	"stratum/wire"
)

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"0.6.0", "0.5.0", 1}, {"0.5.0", "0.6.0", -1}, {"0.10.0", "0.9.9", 1}, {"1.0.0", "1.0.0", 0},
		{"1.0.0-rc.1", "1.0.0", -1}, {"1.0.0-rc.2", "1.0.0-rc.10", -1}, {"1.0.0-alpha", "1.0.0-1", 1},
		{"1.0.0-alpha", "1.0.0-alpha.1", -1}, {"1.0.0+build.5", "1.0.0", 0},
	} {
		if got := semver.Compare(c.a, c.b); got != c.want {
			t.Errorf("compare(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestResolveRelease(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		flag, recorded, stratumRel string
		imageVersion               string // IMAGE_VERSION line of ROOT/etc/os-release ("" = none)
		want                       string
		wantErr                    string
	}{
		{name: "nothing says", want: ""},
		{name: "flag only", flag: "0.5.0", want: "0.5.0"},
		{name: "recorded only", recorded: "0.6.0", want: "0.6.0"},
		{name: "recorded newer than the flag", flag: "0.5.0", recorded: "0.6.0", want: "0.6.0"},
		{name: "flag newer than recorded", flag: "0.7.0", recorded: "0.6.0", want: "0.7.0"},
		{name: "flag wins over the host", flag: "0.5.0", stratumRel: "0.6.0", want: "0.5.0"},
		{name: "stratum release file", stratumRel: "0.6.0", want: "0.6.0"},
		{name: "IMAGE_VERSION", imageVersion: `IMAGE_VERSION="0.6.0"`, want: "0.6.0"},
		{name: "stratum file before IMAGE_VERSION", stratumRel: "0.6.0", imageVersion: "IMAGE_VERSION=42.1.0", want: "0.6.0"},
		{name: "IMAGE_VERSION not a release", imageVersion: "IMAGE_VERSION=2026.01", want: ""},
		{name: "recorded newer than the host (upgrade staged)", recorded: "0.6.0", stratumRel: "0.5.0", want: "0.6.0"},
		{name: "host newer than recorded (upgraded by other means)", recorded: "0.5.0", imageVersion: "IMAGE_VERSION=0.6.0", want: "0.6.0"},
		{name: "non-semver flag", flag: "six", wantErr: `--release "six"`},
		{name: "damaged recorded file", flag: "0.5.0", recorded: "garbage", wantErr: "garbage"},
		{name: "damaged stratum file", stratumRel: "latest", wantErr: "usr/lib/stratum/release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, root := t.TempDir(), t.TempDir()
			put := func(dir, rel, text string) {
				p := filepath.Join(dir, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.recorded != "" {
				put(state, releaseFile, tc.recorded)
			}
			if tc.stratumRel != "" {
				put(root, hostReleaseFile, tc.stratumRel)
			}
			if tc.imageVersion != "" {
				put(root, "etc/os-release", "ID=stratum\n"+tc.imageVersion)
			}
			got, err := resolveRelease(tc.flag, state, root, &printer{w: &strings.Builder{}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error naming %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{Founder: "founder", CAPin: "sha256:xyz", SelfUpgrade: true}
	err := c.validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"HOST:PORT", "--token is required", "--ca-pin", "--upgrade-hook"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	good := Config{Founder: "192.0.2.10:9443", Token: "t", CAPin: "sha256:" + strings.Repeat("AB", 32)}
	if err := good.validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func TestParseContentRange(t *testing.T) {
	if s, tot, ok := parseContentRange("bytes 100-199/1000"); !ok || s != 100 || tot != 1000 {
		t.Errorf("%d %d %v", s, tot, ok)
	}
	for _, bad := range []string{"", "bytes */1000", "items 1-2/3", "bytes 1-2", "bytes x-2/3"} {
		if _, _, ok := parseContentRange(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestEnvFiles(t *testing.T) {
	if _, err := renderEnv([]envLine{{"K", "a\nB=evil"}}); err == nil || strings.Contains(err.Error(), "evil") {
		t.Errorf("a value with a newline: %v (and the value must not be in the message)", err)
	}
	// A Postgres replica: no admin or OpenBao lines when the founder sent none.
	b := &wire.Bundle{Role: "postgres", ClusterID: "cl-1", ParentDomain: "d", Region: "r"}
	b.VIPs = &wire.VIPs{OpenBao: "2001:db8::242"}
	got, _ := renderEnv(controlPlaneEnv(b, "n-1"))
	if want := "STRATUM_PARENT_DOMAIN=d\nSTRATUM_REGION=r\nSTRATUM_CLUSTER_ID=cl-1\nSTRATUM_NODE_ID=n-1\n"; string(got) != want {
		t.Errorf("postgres env:\n%s", got)
	}
	if bootstrapCredentials(b) != nil {
		t.Error("credentials written without a password")
	}
	// A worker with a token and an IPv6 VIP; a founder without adminEmail.
	b.Role, b.OpenBaoToken, b.AdminPassword = "worker", "tok", "pw"
	got, _ = renderEnv(controlPlaneEnv(b, "n-1"))
	for _, want := range []string{"STRATUM_IAM_ADMIN_EMAIL=admin@stratum.local\n", "STRATUM_OPENBAO_ADDR=https://[2001:db8::242]:8200\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("env lacks %q:\n%s", want, got)
		}
	}
}

func TestIdentityPersists(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint != b.Fingerprint || !strings.HasPrefix(a.Fingerprint, "sha256:") || len(a.Fingerprint) != 71 {
		t.Errorf("fingerprints %s %s", a.Fingerprint, b.Fingerprint)
	}
	cert, err := a.ClientCertificate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := spkiPinOf(cert.Leaf.RawSubjectPublicKeyInfo); got != a.Fingerprint {
		t.Errorf("the certificate's pin %s is not the fingerprint %s", got, a.Fingerprint)
	}
	if err := os.Chmod(filepath.Join(dir, identityFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateIdentity(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key is used: %v", err)
	}
}

func TestMachineID(t *testing.T) {
	root := t.TempDir()
	derived := machineID(root, "sha256:abc")
	if len(derived) != 32 || !isHex(derived) || derived != machineID(root, "sha256:abc") || derived == machineID(root, "sha256:abd") {
		t.Errorf("derived id %q", derived)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("0123456789abcdef", 2)
	if err := os.WriteFile(filepath.Join(root, "etc/machine-id"), []byte(id+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if got := machineID(root, "sha256:abc"); got != id {
		t.Errorf("machine-id %q, want %q", got, id)
	}
}

func spkiPinOf(spki []byte) string {
	sum := sha256.Sum256(spki)
	return "sha256:" + hex.EncodeToString(sum[:])
}
