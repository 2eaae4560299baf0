package hostrecord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/release"
	"stratum/releaseset"
	"stratum/wire"
)

// writeStored lays out a payload directory: rel's manifest under
// releases/<rel>/payload, its sysext under releases/<rel>, its os/ file
// under os/<layout> unless skipOS.
func writeStored(t *testing.T, dir, rel, layout string, skipOS bool) []byte {
	t.Helper()
	blob, ext := []byte("os blob "+rel), []byte("sysext image")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	m := release.Manifest{SchemaVersion: 1, Release: rel, CreatedAt: time.Now().UTC(), OS: release.OSImage{ImageVersion: "v" + rel, Layout: layout},
		Files:  []release.File{{Path: "os/blobs/sha256/" + sum(blob), Size: int64(len(blob)), SHA256: sum(blob)}, {Path: "sysext/ovs.raw", Size: int64(len(ext)), SHA256: sum(ext)}},
		Sysext: []release.Sysext{{Name: "stratum-ovs", Version: "3.5.3-5." + rel, Path: "sysext/ovs.raw", RootHash: strings.Repeat(rel[2:3], 64)}}}
	raw, _ := json.Marshal(m)
	relDir := filepath.Join(dir, "releases", rel)
	os.MkdirAll(filepath.Join(relDir, "payload"), 0o755)
	os.MkdirAll(filepath.Join(relDir, "sysext"), 0o755)
	os.WriteFile(filepath.Join(relDir, "payload", "manifest.json"), raw, 0o644)
	os.WriteFile(filepath.Join(relDir, "sysext", "ovs.raw"), ext, 0o644)
	if !skipOS {
		os.MkdirAll(filepath.Join(dir, "os", layout, "blobs", "sha256"), 0o755)
		os.WriteFile(filepath.Join(dir, "os", layout, "blobs", "sha256", sum(blob)), blob, 0o644)
	}
	return raw
}

func TestStored(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/stratum"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/stratum/release"), []byte("0.2.0\n"), 0o644)
	raw := writeStored(t, dir, "0.2.0", "3f1c0d77", false)
	writeStored(t, dir, "0.3.0", "9a9a9a9a", true) // fetch interrupted before the OS
	os.MkdirAll(filepath.Join(dir, "releases", "not-a-release"), 0o755)
	os.MkdirAll(filepath.Join(dir, "os", "0ld0ld00"), 0o755)
	os.WriteFile(filepath.Join(dir, "stray.tmp"), nil, 0o644)

	rec, problems := Collect(context.Background(), Host{Root: root, PayloadDir: dir, Run: fakeRunner{}})
	if _, ok := problemsOf(problems)["stored"]; ok {
		t.Fatal(problems)
	}
	st := rec.Stored
	if st == nil || len(st.Releases) != 2 {
		t.Fatalf("stored: %+v", st)
	}
	r0, r1 := st.Releases[0], st.Releases[1]
	if r0 != (wire.StoredRelease{Release: "0.2.0", Complete: true, Installed: true, Path: "releases/0.2.0", OS: "os/3f1c0d77"}) {
		t.Fatalf("0.2.0: %+v", r0)
	}
	if r1.Release != "0.3.0" || r1.Complete || r1.Installed {
		t.Fatalf("0.3.0: %+v", r1)
	}
	var left []string
	for _, l := range st.Leftovers {
		left = append(left, l.Path)
	}
	if strings.Join(left, ",") != "os/0ld0ld00,releases/not-a-release,stray.tmp" {
		t.Fatalf("leftovers: %v", left)
	}
	sum := sha256.Sum256(raw)
	if len(rec.Payloads) != 1 || rec.Payloads[0] != (wire.Payload{Release: "0.2.0", SHA256: hex.EncodeToString(sum[:])}) {
		t.Fatalf("payloads: %+v", rec.Payloads)
	}
	// The collected record passes the founder's own request checks.
	body, _ := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: rec})
	if _, err := releaseset.DecodeRecordRequest(body); err != nil {
		t.Fatalf("the founder would refuse this record: %v", err)
	}

	// A payload dir that does not exist keeps nothing; one that cannot
	// be read is not read.
	rec, _ = Collect(context.Background(), Host{Root: root, PayloadDir: filepath.Join(dir, "none"), Run: fakeRunner{}})
	if rec.Stored == nil || len(rec.Stored.Releases)+len(rec.Stored.Leftovers) != 0 {
		t.Fatalf("absent dir: %+v", rec.Stored)
	}
	file := filepath.Join(dir, "stray.tmp")
	rec, problems = Collect(context.Background(), Host{Root: root, PayloadDir: file, Run: fakeRunner{}})
	if rec.Stored != nil || problemsOf(problems)["stored"] == "" {
		t.Fatalf("a file as payload dir: %+v %v", rec.Stored, problems)
	}
}

// TestExtensionLinkedToStoredRelease: a merged extension is linked to the
// stored release whose manifest lists it at that version.
func TestExtensionLinkedToStoredRelease(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	writeStored(t, dir, "0.2.0", "3f1c0d77", false)
	writeStored(t, dir, "0.3.0", "9a9a9a9a", false)
	os.MkdirAll(filepath.Join(root, "usr/lib/extension-release.d"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/lib/extension-release.d/extension-release.stratum-ovs"), []byte("SYSEXT_VERSION_ID=3.5.3-5.0.3.0\n"), 0o644)
	rec, problems := Collect(context.Background(), Host{Root: root, PayloadDir: dir, Run: fakeRunner{
		"systemd-sysext list": {file: "sysext-list-empty.json"}, "systemd-sysext status": {file: "sysext-status-merged.json"}}})
	if p := problemsOf(problems); p["extensions"] != "" || p["stored"] != "" {
		t.Fatal(problems)
	}
	if len(rec.Extensions) != 1 || rec.Extensions[0].Release != "0.3.0" || rec.Extensions[0].RootHash != strings.Repeat("3", 64) {
		t.Fatalf("%+v", rec.Extensions)
	}
}
