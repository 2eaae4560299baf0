package hostrecord

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/buildinfo"
	"stratum/wire"
)

// fakeRunner answers commands from fixture files: key is "name arg0".
type fakeRunner map[string]fakeAnswer

type fakeAnswer struct {
	file string // testdata file with the tool's stdout
	text string // or the stdout itself
	code int    // exit status
	err  error  // e.g. ErrMissing
}

func (f fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	key := name
	if len(args) > 0 {
		key += " " + args[0]
	}
	a, ok := f[key]
	if !ok {
		return nil, ErrMissing
	}
	if a.err != nil {
		return nil, a.err
	}
	out := []byte(a.text)
	if a.file != "" {
		b, err := os.ReadFile(filepath.Join("testdata", a.file))
		if err != nil {
			panic(err)
		}
		out = b
	}
	if a.code != 0 {
		return out, &ExitError{Name: name, Code: a.code}
	}
	return out, nil
}

// debianHost is this Debian build host as captured: no bootc, no
// container runtime, systemd-sysext with one directory extension found,
// dpkg-query for two packages and one unknown name.
func debianHost() fakeRunner {
	return fakeRunner{
		"systemd-sysext list":   {file: "sysext-list-one.json"},
		"systemd-sysext status": {file: "sysext-status-none.json"},
		"dpkg-query -W":         {file: "dpkg-query.out", code: 1},
	}
}

func problemsOf(ps []Problem) map[string]string {
	m := map[string]string{}
	for _, p := range ps {
		m[p.Field] = p.Err
	}
	return m
}

func TestCollectDebianHost(t *testing.T) {
	pkgs, err := ParsePackages("tls=openssl|openssl-libs,systemd,ovs=openvswitch-switch|openvswitch3.5")
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Root: "testdata/root", Packages: pkgs, Run: debianHost(),
		Build: buildinfo.Info{Version: "v0.1.0-abc", Commit: "4298b2fe"}, Executable: "/usr/local/bin/stratum"}
	rec, problems := Collect(context.Background(), h)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	kernel, _ := Kernel()
	if rec.OS == nil || rec.OS.ID != "debian" || rec.OS.VersionID != "12" || rec.OS.PrettyName != "Debian GNU/Linux 12 (bookworm)" || rec.OS.Kernel != kernel || kernel == "" {
		t.Fatalf("os: %+v (kernel %q)", rec.OS, kernel)
	}
	if rec.ImageMode || rec.Bootc != nil {
		t.Fatalf("a host without bootc is image mode: %v %+v", rec.ImageMode, rec.Bootc)
	}
	if len(rec.Extensions) != 1 || rec.Extensions[0].Name != "stratum-demo" || rec.Extensions[0].Merged {
		t.Fatalf("extensions: %+v", rec.Extensions)
	}
	want := []wire.Package{{Component: "tls", Name: "openssl", Version: "3.0.22-1~deb12u2"}, {Component: "systemd", Name: "systemd", Version: "252.39-1~deb12u2"}}
	if len(rec.Packages) != 2 || rec.Packages[0] != want[0] || rec.Packages[1] != want[1] {
		t.Fatalf("packages: %+v", rec.Packages)
	}
	// Neither a pins file nor a payload dir was given: not read.
	if rec.Pins != nil || rec.Unpinned != nil || rec.Stored != nil || rec.Payloads != nil {
		t.Fatalf("unconfigured fields were filled: %+v %+v %+v", rec.Pins, rec.Stored, rec.Payloads)
	}
	if rec.ControlPlane != nil {
		t.Fatalf("controlPlane without control-plane.json: %+v", rec.ControlPlane)
	}
	hb := rec.HostBinaries
	if hb == nil || hb.Commit != "4298b2fe" || hb.Source != wire.SourceControlPlaneImage || hb.Want != "" || hb.Stale {
		t.Fatalf("hostBinaries: %+v", hb)
	}
	if rec.HostReportedAt == nil || time.Since(*rec.HostReportedAt) > time.Minute {
		t.Fatalf("hostReportedAt: %v", rec.HostReportedAt)
	}
}

// TestMissingTools: a host with none of the tools reports what it can
// read and leaves the rest unread, never made up.
func TestMissingTools(t *testing.T) {
	pins := filepath.Join("testdata", "pins.json")
	pkgs, _ := ParsePackages("openssl")
	rec, problems := Collect(context.Background(), Host{Root: t.TempDir(), Packages: pkgs, PinsFile: pins, Run: fakeRunner{}})
	p := problemsOf(problems)
	if !strings.Contains(p["os"], "os-release") || rec.OS == nil || rec.OS.ID != "" || rec.OS.Kernel == "" {
		t.Fatalf("os: %+v %q", rec.OS, p["os"])
	}
	if !strings.Contains(p["packages"], "neither dpkg-query nor rpm") || rec.Packages != nil {
		t.Fatalf("packages: %+v %q", rec.Packages, p["packages"])
	}
	if !strings.Contains(p["pins"], "no container runtime") || rec.Pins != nil {
		t.Fatalf("pins: %+v %q", rec.Pins, p["pins"])
	}
	// bootc and systemd-sysext missing are plain facts of the host.
	if _, ok := p["bootc"]; ok || rec.Bootc != nil || rec.Extensions != nil {
		t.Fatalf("bootc/extensions: %v %+v %+v", p, rec.Bootc, rec.Extensions)
	}
	if rec.HostBinaries == nil || rec.HostBinaries.Commit != wire.CommitUnknown || !rec.HostBinaries.Stale {
		t.Fatalf("hostBinaries of a build without a commit: %+v", rec.HostBinaries)
	}
}

// TestMalformedOutput: each tool printing something unreadable leaves its
// field unread and says why; nothing panics.
func TestMalformedOutput(t *testing.T) {
	pkgs, _ := ParsePackages("openssl")
	for _, tc := range []struct {
		name   string
		runner fakeRunner
		field  string
		unread func(wire.Record) bool
	}{
		{"bootc truncated", fakeRunner{"bootc status": {text: `{"kind":"BootcHost","status":{"booted":`}}, "bootc",
			func(r wire.Record) bool { return r.Bootc == nil && !r.ImageMode }},
		{"bootc bad digest", fakeRunner{"bootc status": {text: `{"kind":"BootcHost","status":{"booted":{"image":{"image":{"image":"x","transport":"registry"},"imageDigest":"md5:1"}}}}`}}, "bootc",
			func(r wire.Record) bool { return r.Bootc == nil }},
		{"bootc not a host", fakeRunner{"bootc status": {text: `[]`}}, "bootc",
			func(r wire.Record) bool { return r.Bootc == nil }},
		{"bootc fails", fakeRunner{"bootc status": {code: 1}}, "bootc",
			func(r wire.Record) bool { return r.Bootc == nil }},
		{"sysext list garbage", fakeRunner{"systemd-sysext list": {text: "NAME TYPE PATH\n"}, "systemd-sysext status": {file: "sysext-status-none.json"}}, "extensions",
			func(r wire.Record) bool { return r.Extensions == nil }},
		{"sysext status odd", fakeRunner{"systemd-sysext list": {file: "sysext-list-empty.json"}, "systemd-sysext status": {text: `[{"hierarchy":"/usr","extensions":"some"}]`}}, "extensions",
			func(r wire.Record) bool { return r.Extensions == nil }},
		{"dpkg odd line", fakeRunner{"dpkg-query -W": {text: "openssl 3.0\n"}}, "packages",
			func(r wire.Record) bool { return r.Packages == nil }},
		{"dpkg broken", fakeRunner{"dpkg-query -W": {code: 2}}, "packages",
			func(r wire.Record) bool { return r.Packages == nil }},
		{"rpm odd line", fakeRunner{"rpm -q": {text: "openssl\t\t\n", code: 0}}, "packages",
			func(r wire.Record) bool { return r.Packages == nil }},
		{"docker garbage", fakeRunner{"docker ps": {text: "CONTAINER ID   IMAGE\n"}}, "pins",
			func(r wire.Record) bool { return r.Pins == nil && r.Unpinned == nil }},
		{"docker without daemon", fakeRunner{"docker ps": {code: 1}}, "pins",
			func(r wire.Record) bool { return r.Pins == nil }},
		{"podman garbage", fakeRunner{"podman ps": {text: "{}"}}, "pins",
			func(r wire.Record) bool { return r.Pins == nil }},
		{"timeout", fakeRunner{"bootc status": {err: context.DeadlineExceeded}}, "bootc",
			func(r wire.Record) bool { return r.Bootc == nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, problems := Collect(context.Background(), Host{Root: "testdata/root", Packages: pkgs, PinsFile: "testdata/pins.json", Run: tc.runner})
			if _, ok := problemsOf(problems)[tc.field]; !ok {
				t.Fatalf("no problem reported for %s: %v", tc.field, problems)
			}
			if !tc.unread(rec) {
				t.Fatalf("%s was filled from bad output: %+v", tc.field, rec)
			}
		})
	}
}

func TestParseBootc(t *testing.T) {
	raw, _ := os.ReadFile("testdata/bootc-not-bootc.json")
	if b, im, err := parseBootc(raw); err != nil || b != nil || im {
		t.Fatalf("not a bootc host: %+v %v %v", b, im, err)
	}
	raw, _ = os.ReadFile("testdata/bootc-staged.json")
	b, im, err := parseBootc(raw)
	if err != nil || !im || b.Booted == nil || b.Staged == nil || b.Rollback != nil {
		t.Fatalf("%+v %v %v", b, im, err)
	}
	if b.Booted.Version != "v0.2.0" || b.Booted.Digest != "sha256:"+strings.Repeat("1", 64) || b.Booted.Image != "registry.example.com/stratum-os:v0.2.0" ||
		b.Booted.Transport != "registry" || b.Booted.Architecture != "amd64" || *b.Booted.SoftRebootCapable || !*b.Staged.SoftRebootCapable ||
		!b.Staged.Timestamp.Equal(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("booted %+v staged %+v", b.Booted, b.Staged)
	}
	// The whole record with a staged deployment validates as a request.
	rec, problems := Collect(context.Background(), Host{Root: "testdata/root", Run: fakeRunner{"bootc status": {file: "bootc-staged.json"}}, Executable: "/usr/bin/stratum", Build: buildinfo.Info{Commit: "abcd1234"}})
	if len(problems) != 0 || !rec.ImageMode || rec.HostBinaries.Source != wire.SourceOSImage || rec.HostBinaries.Want != "" {
		t.Fatalf("%v %+v", problems, rec.HostBinaries)
	}
}

func TestMergedExtension(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr/lib/extension-release.d"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/lib/extension-release.d/extension-release.stratum-ovs"), []byte("ID=_any\nSYSEXT_LEVEL=1.0\nSYSEXT_VERSION_ID=3.5.3-5.el10s\n"), 0o644)
	rec, problems := Collect(context.Background(), Host{Root: root, Run: fakeRunner{
		"systemd-sysext list": {file: "sysext-list-one.json"}, "systemd-sysext status": {file: "sysext-status-merged.json"}}})
	if _, ok := problemsOf(problems)["extensions"]; ok {
		t.Fatal(problems)
	}
	want := []wire.Extension{{Name: "stratum-demo"}, {Name: "stratum-ovs", Merged: true, Version: "3.5.3-5.el10s", SysextLevel: "1.0"}}
	if len(rec.Extensions) != 2 || rec.Extensions[0] != want[0] || rec.Extensions[1] != want[1] {
		t.Fatalf("%+v", rec.Extensions)
	}
}

func TestPins(t *testing.T) {
	for _, tc := range []struct {
		name   string
		runner fakeRunner
	}{
		{"podman", fakeRunner{"podman ps": {file: "podman-ps.json"}}},
		{"docker", fakeRunner{"docker ps": {file: "docker-ps.jsonl"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, problems := Collect(context.Background(), Host{Root: "testdata/root", PinsFile: "testdata/pins.json", Run: tc.runner})
			if _, ok := problemsOf(problems)["pins"]; ok {
				t.Fatal(problems)
			}
			states := map[string]wire.Pin{}
			for _, p := range rec.Pins {
				states[p.Name] = p
			}
			if p := states["ovn"]; p.State != wire.PinCurrent || p.Containers != 1 {
				t.Fatalf("ovn: %+v", p)
			}
			if p := states["postgres"]; p.State != wire.PinAbsent || p.Containers != 0 {
				t.Fatalf("postgres: %+v", p)
			}
			if p := states["controlplane"]; p.State != wire.PinSelf || p.Pinned != "" {
				t.Fatalf("controlplane: %+v", p)
			}
			if len(rec.Unpinned) != 1 || rec.Unpinned[0].Image != "docker.io/library/busybox:latest" || rec.Unpinned[0].Containers != 1 {
				t.Fatalf("unpinned: %+v", rec.Unpinned)
			}
			if tc.name == "podman" {
				if p := states["axdnsd"]; p.State != wire.PinDiffers || p.Running != "registry.example.com/stratum/dns:1.4" {
					t.Fatalf("axdnsd: %+v", p)
				}
				if p := states["controlplane"]; p.Running != "registry.example.com/stratum/controlplane:v0.2.0" || p.Containers != 1 {
					t.Fatalf("controlplane: %+v", p)
				}
			}
		})
	}
}

func TestPinsFileProblems(t *testing.T) {
	for _, body := range []string{
		``, `{`, `{"pins":[{"name":"a"}]}`, `{"pins":[{"name":"a","repository":"r","pinned":"other@sha256:1"}]}`,
		`{"pins":[{"name":"a","repository":"r","self":true,"pinned":"r:1"}]}`, `{"pins":[],"extra":1}`,
		`{"pins":[{"name":"a","repository":"r","pinned":"r:1"},{"name":"a","repository":"r","pinned":"r:1"}]}`,
	} {
		if _, err := parsePinsFile([]byte(body)); err == nil {
			t.Errorf("pins file %q accepted", body)
		}
	}
	if _, problems := Collect(context.Background(), Host{Root: "testdata/root", PinsFile: filepath.Join(t.TempDir(), "none.json"), Run: fakeRunner{"podman ps": {text: "[]"}}}); problemsOf(problems)["pins"] == "" {
		t.Fatal("a missing pins file is no problem")
	}
}

func TestParsePackages(t *testing.T) {
	got, err := ParsePackages(" ovs=openvswitch-switch|openvswitch3.5 , openssl,")
	if err != nil || len(got) != 2 || got[0].Component != "ovs" || len(got[0].Names) != 2 || got[1].Component != "openssl" || got[1].Names[0] != "openssl" {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"a=", "=b", "a=-x", "a=b;rm", "a=b,a=c"} {
		if _, err := ParsePackages(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestControlPlaneFile(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/stratum"), 0o755)
	write := func(s string) { os.WriteFile(filepath.Join(root, ControlPlaneFile), []byte(s), 0o644) }
	write(`{"version":"v0.2.0-abcd1234","commit":"abcd1234","schemaLevel":7,"compatSchemaLevel":5}`)
	rec, problems := Collect(context.Background(), Host{Root: root, Run: fakeRunner{}, Build: buildinfo.Info{Commit: "ffff0000"}})
	if len(problemsOf(problems)["controlPlane"]) != 0 || rec.ControlPlane == nil || *rec.ControlPlane.SchemaLevel != 7 {
		t.Fatalf("%v %+v", problems, rec.ControlPlane)
	}
	// A mutable node should run its control plane's build.
	if hb := rec.HostBinaries; hb.Want != "abcd1234" || !hb.Stale {
		t.Fatalf("hostBinaries: %+v", hb)
	}
	write(`{"version":"x","commit":"abcd1234","bogus":1}`)
	rec, problems = Collect(context.Background(), Host{Root: root, Run: fakeRunner{}})
	if problemsOf(problems)["controlPlane"] == "" || rec.ControlPlane != nil {
		t.Fatalf("a bad control-plane.json was read: %+v", rec.ControlPlane)
	}
}

func TestExecRunner(t *testing.T) {
	var r ExecRunner
	if _, err := r.Run(context.Background(), "stratum-no-such-tool"); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing tool: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.Run(ctx, "sleep", "10"); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a hung tool was not cut: %v after %v", err, time.Since(start))
	}
	out, err := r.Run(context.Background(), "sh", "-c", "echo out; echo err >&2; exit 3")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Stderr != "err" || string(out) != "out\n" {
		t.Fatalf("%q %v", out, err)
	}
}

// FuzzParsers feeds outside output to every parser of this package:
// none may panic, and what they accept must be usable.
func FuzzParsers(f *testing.F) {
	for _, name := range []string{"bootc-staged.json", "bootc-not-bootc.json", "sysext-list-one.json", "sysext-status-merged.json", "dpkg-query.out", "podman-ps.json", "docker-ps.jsonl", "pins.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if bc, im, err := parseBootc(b); err == nil && im && (bc == nil || bc.Booted == nil) {
			t.Fatal("image mode without a booted deployment")
		}
		parseSysextList(b)
		parseSysextStatus(b)
		parseDpkg(b)
		parseRpm(b)
		parsePodmanPS(b)
		parseDockerPS(b)
		if pf, err := parsePinsFile(b); err == nil {
			comparePins(pf, []string{"r:1", "r@sha256:1"})
		}
		parseControlPlane(b)
	})
}

func TestProblemLogOncePerChange(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var pl ProblemLog
	broken := []Problem{{Field: "pins", Err: "pins file: bad"}}
	pl.Report(log, broken)
	pl.Report(log, broken)
	pl.Report(log, []Problem{{Field: "pins", Err: "pins file: worse"}})
	pl.Report(log, nil)
	pl.Report(log, nil)
	out := buf.String()
	if strings.Count(out, "not read") != 2 || strings.Count(out, "read again") != 1 || !strings.Contains(out, "worse") {
		t.Fatalf("log:\n%s", out)
	}
}

// TestOSFallbackAndEmptyExtensions: a root without os-release reports
// the fallback root's (the agent's is this host's), and systemd-sysext
// that ran and found nothing is an empty list, not "not read".
func TestOSFallbackAndEmptyExtensions(t *testing.T) {
	fallback := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fallback, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fallback, "etc/os-release"), []byte("ID=debian\nVERSION_ID=12\nPRETTY_NAME=\"Debian 12\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := fakeRunner{"systemd-sysext list": {text: "[]"}, "systemd-sysext status": {text: `[{"hierarchy":"/usr","extensions":"none"}]`}}
	rec, problems := Collect(context.Background(), Host{Root: t.TempDir(), OSFallback: fallback, Run: run})
	if rec.OS == nil || rec.OS.ID != "debian" || rec.OS.PrettyName != "Debian 12" {
		t.Fatalf("os from the fallback root: %+v %v", rec.OS, problems)
	}
	if p := problemsOf(problems); p["os"] != "" || p["extensions"] != "" {
		t.Fatalf("problems: %v", p)
	}
	raw, _ := json.Marshal(rec)
	if rec.Extensions == nil || !strings.Contains(string(raw), `"extensions":[]`) {
		t.Fatalf("extensions that ran and found none: %s", raw)
	}
	// Not read at all (no systemd-sysext) stays null.
	rec, _ = Collect(context.Background(), Host{Root: t.TempDir(), Run: fakeRunner{}})
	if raw, _ := json.Marshal(rec); !strings.Contains(string(raw), `"extensions":null`) {
		t.Fatalf("extensions not read: %s", raw)
	}
}
