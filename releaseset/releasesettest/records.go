// Package releasesettest makes realistic node release records for tests
// and benchmarks: the product package ships none of them.
package releasesettest

import (
	"crypto/sha256"
	"encoding/hex"
	"stratum/wire"
	"strings"
	"time"
)

// RecordedAt is the RecordedAt of every Record: describe
// them with a Now within RecentWindow after it to see them recent.
var RecordedAt = time.Date(2026, time.July, 1, 12, 0, 0, 0, time.UTC)

// Record returns a realistic record for node i, for benchmarks
// and tests: an image-mode node with its deployments, 4 system extensions,
// 30 host packages, 36 pins and 2 payloads. It passes
// DecodeRecordRequest's checks. Records of one variant only differ in
// what a node's role and load change (pins absent on storage nodes,
// container counts, hostReportedAt), so they produce no skew among
// themselves; variant (taken mod 3) picks:
//
//   - 0: release 0.2.0, consistent.
//   - 1: release 0.1.0, an older build of everything: skew against 0.
//   - 2: release 0.2.0 with drift: stale host binaries, a staged
//     deployment, a pin that differs and an unpinned image running.
func Record(i int, variant int) wire.Record {
	variant = ((variant % 3) + 3) % 3
	b := syntheticBuilds[0]
	if variant == 1 {
		b = syntheticBuilds[1]
	}
	hostAt := RecordedAt.Add(-time.Duration(30+i%60) * time.Second)
	level := b.schema
	compat := b.schema - 2
	r := wire.Record{
		RecordedAt:     RecordedAt,
		HostReportedAt: &hostAt,
		ImageMode:      true,
		OS: &wire.OS{
			PrettyName:       "Stratum OS " + b.version,
			ID:               "almalinux",
			VersionID:        b.versionID,
			ImageVersion:     b.version,
			BuildID:          b.commit,
			BaseDigest:       digest("base", b.versionID),
			KernelArgsDigest: digest("kargs", b.version),
			Kernel:           b.kernel,
		},
		Bootc: &wire.Bootc{
			Booted:   b.deployment(true),
			Rollback: syntheticBuilds[1].deployment(false),
		},
		ControlPlane: &wire.ControlPlane{Version: b.version, Commit: b.commit, SchemaLevel: &level,
			CompatSchemaLevel: &compat, DatabaseSchemaLevel: &level},
		HostBinaries: &wire.HostBinaries{Source: wire.SourceOSImage, Commit: b.commit, Want: b.commit},
		Payloads: []wire.Payload{
			{Release: syntheticBuilds[1].release, SHA256: Hex("payload", syntheticBuilds[1].release)},
			{Release: syntheticBuilds[0].release, SHA256: Hex("payload", syntheticBuilds[0].release)},
		},
		Stored: &wire.Storage{Releases: []wire.StoredRelease{
			{Release: syntheticBuilds[1].release, Complete: true, Installed: true,
				Path: "releases/" + syntheticBuilds[1].release, OS: "os/" + Hex("os", syntheticBuilds[1].versionID)[:8]},
			{Release: syntheticBuilds[0].release, Complete: true,
				Path: "releases/" + syntheticBuilds[0].release, OS: "os/" + Hex("os", syntheticBuilds[0].versionID)[:8]},
		}},
	}
	for _, e := range syntheticExtensions {
		r.Extensions = append(r.Extensions, wire.Extension{Name: e.name, Version: e.versions[b.index],
			Merged: true, SysextLevel: b.versionID, Release: b.release, RootHash: Hex("verity", e.name, b.release)})
	}
	for _, p := range syntheticPackages {
		r.Packages = append(r.Packages, wire.Package{Component: p.component, Name: p.name, Version: p.versions[b.index]})
	}
	storage := i%4 == 0 // every fourth node stores, the others compute
	for k, name := range syntheticPins {
		p := wire.Pin{Name: name, Pinned: b.ref(name), State: wire.PinCurrent, Containers: 1 + (i+k)%3}
		switch {
		case k == 0:
			p = wire.Pin{Name: name, State: wire.PinSelf, Running: b.ref(name), Containers: 1}
		case storage && strings.HasPrefix(name, "nova-"), !storage && strings.HasPrefix(name, "ceph-osd"):
			p.State, p.Containers = wire.PinAbsent, 0
		}
		r.Pins = append(r.Pins, p)
	}
	if variant == 2 {
		r.HostBinaries.Commit, r.HostBinaries.Stale = syntheticBuilds[1].commit, true
		r.Bootc.Staged = syntheticBuilds[0].deployment(true)
		r.Bootc.Staged.Version = "0.2.1"
		r.Bootc.Staged.Digest = digest("image", "0.2.1")
		r.Pins[2].State, r.Pins[2].Running = wire.PinDiffers, syntheticBuilds[1].ref(r.Pins[2].Name)
		r.Unpinned = []wire.Unpinned{{Image: "docker.io/library/busybox:1.36", Containers: 1}}
	}
	return r
}

// syntheticBuild is one build of everything a release ships.
type syntheticBuild struct {
	index                    int // into the versions of packages and extensions
	release, version, commit string
	versionID, kernel        string
	schema                   int
}

var syntheticBuilds = [2]syntheticBuild{
	{0, "0.2.0", "v0.2.0", "4298b2fe", "10.2", "6.12.0-211.56.1.el10_2.x86_64", 42},
	{1, "0.1.0", "v0.1.0", "1a2b3c4d", "10.1", "6.12.0-124.8.1.el10_1.x86_64", 37},
}

// ref is the pinned reference of an image in this build.
func (b syntheticBuild) ref(name string) string {
	return "registry.example.com/stratum/" + name + "@" + digest("image", name, b.release)
}

func (b syntheticBuild) deployment(booted bool) *wire.Deployment {
	built := time.Date(2026, time.June, 20-10*b.index, 8, 0, 0, 0, time.UTC)
	d := &wire.Deployment{
		Image:        "registry.example.com/stratum-os:" + b.version,
		Transport:    "registry",
		Digest:       digest("image", "stratum-os", b.release),
		Version:      b.release,
		Architecture: "amd64",
		Timestamp:    &built,
	}
	if !booted {
		d.SoftRebootCapable = new(false)
	}
	return d
}

var syntheticExtensions = []struct {
	name     string
	versions [2]string
}{
	{"stratum-ovs", [2]string{"3.5.3-5.el10s", "3.5.1-2.el10s"}},
	{"stratum-ovn", [2]string{"25.03.1-3.el10s", "24.09.2-1.el10s"}},
	{"stratum-kvm", [2]string{"9.1.0-15.el10s", "9.0.0-10.el10s"}},
	{"stratum-ceph", [2]string{"19.2.2-1.el10s", "19.2.1-4.el10s"}},
}

var syntheticPackages = []struct {
	component, name string
	versions        [2]string
}{
	{"openvswitch", "openvswitch3.5", [2]string{"3.5.3-5.el10s", "3.5.1-2.el10s"}},
	{"ovn", "ovn25.03", [2]string{"25.03.1-3.el10s", "25.03.0-1.el10s"}},
	{"qemu", "qemu-kvm", [2]string{"9.1.0-15.el10_2", "9.0.0-10.el10_1"}},
	{"libvirt", "libvirt-daemon", [2]string{"10.10.0-7.el10_2", "10.5.0-5.el10_1"}},
	{"edk2", "edk2-ovmf", [2]string{"20241117-2.el10", "20240524-4.el10"}},
	{"podman", "podman", [2]string{"5.4.0-12.el10_2", "5.2.2-9.el10_1"}},
	{"crun", "crun", [2]string{"1.20-2.el10_2", "1.16.1-1.el10_1"}},
	{"conmon", "conmon", [2]string{"2.1.12-5.el10", "2.1.12-5.el10"}},
	{"containers-common", "containers-common", [2]string{"1-105.el10_2", "1-98.el10_1"}},
	{"skopeo", "skopeo", [2]string{"1.18.0-1.el10_2", "1.16.1-2.el10_1"}},
	{"bootc", "bootc", [2]string{"1.1.6-3.el10_2", "1.1.2-1.el10_1"}},
	{"systemd", "systemd", [2]string{"256-46.el10_2", "256-14.el10_1"}},
	{"ceph", "ceph-common", [2]string{"19.2.2-1.el10s", "19.2.1-4.el10s"}},
	{"lvm2", "lvm2", [2]string{"2.03.28-6.el10", "2.03.24-2.el10"}},
	{"cryptsetup", "cryptsetup", [2]string{"2.7.5-2.el10", "2.7.3-1.el10"}},
	{"tpm2-tools", "tpm2-tools", [2]string{"5.7-3.el10", "5.7-1.el10"}},
	{"nftables", "nftables", [2]string{"1.1.1-4.el10", "1.0.9-6.el10"}},
	{"iproute", "iproute", [2]string{"6.11.0-1.el10", "6.7.0-2.el10"}},
	{"frr", "frr", [2]string{"10.1.1-3.el10", "10.0.1-2.el10"}},
	{"chrony", "chrony", [2]string{"4.6.1-1.el10", "4.5-3.el10"}},
	{"keepalived", "keepalived", [2]string{"2.2.8-6.el10", "2.2.8-4.el10"}},
	{"haproxy", "haproxy", [2]string{"3.0.5-4.el10", "2.8.10-2.el10"}},
	{"openssl", "openssl", [2]string{"3.2.2-16.el10_2", "3.2.2-12.el10_1"}},
	{"ethtool", "ethtool", [2]string{"6.11-1.el10", "6.7-3.el10"}},
	{"dnsmasq", "dnsmasq", [2]string{"2.90-6.el10", "2.90-4.el10"}},
	{"multipath", "device-mapper-multipath", [2]string{"0.9.9-8.el10", "0.9.9-3.el10"}},
	{"nvme-cli", "nvme-cli", [2]string{"2.11-3.el10", "2.9.1-2.el10"}},
	{"swtpm", "swtpm", [2]string{"0.9.0-4.el10", "0.9.0-1.el10"}},
	{"rsync", "rsync", [2]string{"3.4.1-2.el10", "3.3.0-3.el10"}},
	{"sysext-tools", "systemd-container", [2]string{"256-46.el10_2", "256-14.el10_1"}},
}

// syntheticPins: the control plane first (state self), then the services.
var syntheticPins = []string{
	"stratum-controlplane", "postgres", "openbao", "axdnsd", "coredns", "haproxy",
	"keepalived", "ovn-northd", "ovn-controller", "ovsdb-server-nb", "ovsdb-server-sb",
	"prometheus", "alertmanager", "grafana", "loki", "promtail", "node-exporter",
	"ceph-mon", "ceph-mgr", "ceph-osd", "ceph-mds", "ceph-rgw", "ceph-crash",
	"nova-api", "nova-scheduler", "nova-conductor", "nova-compute", "nova-novncproxy",
	"placement-api", "keystone", "glance-api", "neutron-server", "cinder-api",
	"cinder-volume", "horizon", "memcached",
}

// Hex is a stable hex SHA-256 of parts: a digest that looks real.
func Hex(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

func digest(parts ...string) string { return "sha256:" + Hex(parts...) }
