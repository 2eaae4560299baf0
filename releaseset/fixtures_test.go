package releaseset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"stratum/wire"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/releaseset")

// goldenDir is the module's testdata/releaseset, seen from this package.
const goldenDir = "../testdata/releaseset"

// testNow is the Now of every described fixture.
var testNow = time.Date(2026, time.July, 1, 12, 0, 0, 0, time.UTC)

// checkGolden compares got with the golden file, or rewrites it under
// -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./releaseset -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run go test ./releaseset -update if the change is intended)", name, i+1, g, w)
			}
		}
	}
}

// marshalIndent is the golden JSON form.
func marshalIndent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// digest is a fixture digest named by its parts.
func digest(parts ...string) string { return "sha256:" + hexOf(parts...) }

// hexOf is a stable hex SHA-256 of parts (the form releasesettest.Hex
// gives its records, which an internal test cannot import).
func hexOf(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

// ref is a fixture image reference.
func ref(name, tag string) string {
	return "registry.example.com/stratum/" + name + "@" + digest(name, tag)
}

// baseRecord is a small consistent image-mode record on release 0.2.0,
// recorded two minutes before testNow; cases change it.
func baseRecord() *wire.Record {
	level, compat := 12, 10
	host := testNow.Add(-3 * time.Minute)
	return &wire.Record{
		RecordedAt:     testNow.Add(-2 * time.Minute),
		HostReportedAt: &host,
		ImageMode:      true,
		OS: &wire.OS{
			PrettyName: "Stratum OS 0.2.0", ID: "almalinux", VersionID: "10.2",
			ImageVersion: "0.2.0", BuildID: "4298b2fe",
			BaseDigest: digest("base", "10.2"), KernelArgsDigest: digest("kargs", "0.2.0"),
			Kernel: "6.12.0-211.56.1.el10_2.x86_64",
		},
		Bootc: &wire.Bootc{Booted: &wire.Deployment{
			Image: "registry.example.com/stratum-os:0.2.0", Transport: "registry",
			Digest: digest("stratum-os", "0.2.0"), Version: "0.2.0", Architecture: "amd64",
		}},
		ControlPlane: &wire.ControlPlane{Version: "v0.2.0", Commit: "4298b2fe",
			SchemaLevel: &level, CompatSchemaLevel: &compat, DatabaseSchemaLevel: &level},
		HostBinaries: &wire.HostBinaries{Source: wire.SourceOSImage, Commit: "4298b2fe", Want: "4298b2fe"},
		Extensions: []wire.Extension{{Name: "stratum-ovs", Version: "3.5.3-5.el10s", Merged: true,
			SysextLevel: "10.2", Release: "0.2.0", RootHash: hexOf("verity", "stratum-ovs")}},
		Packages: []wire.Package{
			{Component: "openvswitch", Name: "openvswitch3.5", Version: "3.5.3-5.el10s"},
			{Component: "podman", Name: "podman", Version: "5.4.0-12.el10_2"},
		},
		Pins: []wire.Pin{
			{Name: "stratum-controlplane", State: wire.PinSelf, Running: ref("stratum-controlplane", "0.2.0"), Containers: 1},
			{Name: "postgres", Pinned: ref("postgres", "0.2.0"), State: wire.PinCurrent, Containers: 1},
			{Name: "nova-compute", Pinned: ref("nova-compute", "0.2.0"), State: wire.PinAbsent},
		},
		Payloads: []wire.Payload{{Release: "0.2.0", SHA256: hexOf("payload", "0.2.0")}},
		Stored: &wire.Storage{Releases: []wire.StoredRelease{
			{Release: "0.2.0", Complete: true, Installed: true, Path: "releases/0.2.0", OS: "os/3f1c0d77"},
		}},
	}
}

// cluster is the three members n-a (the founder), n-b and n-c with the
// given records on release 0.2.0; a nil record is a node that never
// recorded.
func cluster(a, b, c *wire.Record) Input {
	in := Input{Now: testNow, Node: "n-a", Members: []string{"n-a", "n-b", "n-c"}, Records: map[string]Stored{}}
	for i, r := range []*wire.Record{a, b, c} {
		if r != nil {
			in.Records[in.Members[i]] = Stored{RunningRelease: "0.2.0", Release: *r}
		}
	}
	if a != nil && a.ControlPlane != nil {
		in.ControlPlane = *a.ControlPlane
	}
	return in
}

// with returns baseRecord changed by f.
func with(f func(r *wire.Record)) *wire.Record {
	r := baseRecord()
	f(r)
	return r
}

// seedExample is the seed's example response, as parsed JSON.
func seedExample(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "seed-example.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// seedRecordBody is a record request whose release is the seed example's
// node release.
func seedRecordBody(t testing.TB) []byte {
	t.Helper()
	node := seedExample(t)["nodes"].([]any)[0].(map[string]any)
	b, err := json.Marshal(map[string]any{"runningRelease": node["runningRelease"], "release": node["release"]})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
