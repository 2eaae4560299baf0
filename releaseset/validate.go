package releaseset

import (
	"path"
	"strconv"
	"strings"

	"stratum/apierr"
	"stratum/semver"
	"stratum/wire"
)

// Value checks run on the decoded request; each adds to f and goes on, so
// the node's author sees every problem in one answer.

func validateRequest(f *apierr.Fields, r *wire.RecordRequest) {
	if r.RunningRelease != "" {
		checkRelease(f, "runningRelease", r.RunningRelease)
	}
	validateRecord(f, &r.Release, "release")
}

func validateRecord(f *apierr.Fields, r *wire.Record, at string) {
	// Paths are written out only for a problem (they were a fifth of
	// a record's checking).
	if r.OS != nil {
		if v := r.OS.BaseDigest; v != "" && !isDigest(v) {
			checkDigest(f, at+".os.baseDigest", v)
		}
		if v := r.OS.KernelArgsDigest; v != "" && !isDigest(v) {
			checkDigest(f, at+".os.kernelArgsDigest", v)
		}
	}
	if b := r.Bootc; b != nil {
		for _, d := range [...]struct {
			name string
			d    *wire.Deployment
		}{{"booted", b.Booted}, {"staged", b.Staged}, {"rollback", b.Rollback}} {
			if d.d != nil && !isDeployment(d.d) {
				validateDeployment(f, d.d, at+".bootc."+d.name)
			}
		}
	}
	if c := r.ControlPlane; c != nil {
		for _, l := range [...]struct {
			name string
			v    *int
		}{{"schemaLevel", c.SchemaLevel}, {"compatSchemaLevel", c.CompatSchemaLevel}, {"databaseSchemaLevel", c.DatabaseSchemaLevel}} {
			if !isLevel(l.v) {
				checkLevel(f, at+".controlPlane."+l.name, l.v)
			}
		}
	}
	if h := r.HostBinaries; h != nil {
		validateHostBinaries(f, h, at+".hostBinaries")
	}
	for i, e := range r.Extensions {
		validateExtension(f, e, elem{at + ".extensions", i})
	}
	components := make(map[string]int, len(r.Packages))
	for i, p := range r.Packages {
		validatePackage(f, p, elem{at + ".packages", i})
		if first, dup := components[p.Component]; dup && p.Component != "" {
			f.Add(index(at+".packages", i)+".component",
				"component %q is already listed at packages[%d]; a node lists one package per component", p.Component, first)
		} else {
			components[p.Component] = i
		}
	}
	for i, p := range r.Pins {
		validatePin(f, p, elem{at + ".pins", i})
	}
	for i, u := range r.Unpinned {
		validateUnpinned(f, u, elem{at + ".unpinned", i})
	}
	for i, p := range r.Payloads {
		validatePayload(f, p, elem{at + ".payloads", i})
	}
	if r.Stored != nil {
		validateStorage(f, r.Stored, at+".stored")
	}
}

func validateDeployment(f *apierr.Fields, d *wire.Deployment, at string) {
	if d == nil {
		return
	}
	if d.Image == "" {
		f.Add(at+".image", "is required")
	}
	checkDigest(f, at+".digest", d.Digest)
}

// isDeployment is validateDeployment's rule, for the caller that tests a
// deployment before it writes its path out.
func isDeployment(d *wire.Deployment) bool { return d.Image != "" && isDigest(d.Digest) }

func validateHostBinaries(f *apierr.Fields, h *wire.HostBinaries, at string) {
	switch h.Source {
	case wire.SourceOSImage, wire.SourceOverlay, wire.SourceControlPlaneImage:
	case "":
		f.Add(at+".source", "is required: os-image, overlay or control-plane-image")
	default:
		f.Add(at+".source", "must be os-image, overlay or control-plane-image, not %q", h.Source)
	}
	if h.Commit != wire.CommitMixed && h.Commit != wire.CommitUnknown && !isCommit(h.Commit) {
		f.Add(at+".commit", "must be a commit (4 to 64 lowercase hex digits), mixed or unknown")
	}
	if h.Want != "" && !isCommit(h.Want) {
		f.Add(at+".want", "must be a commit (4 to 64 lowercase hex digits) or empty")
	}
}

// elem is the path of a list's element; its fields' paths are written
// out only for a problem (a path per value was most of a large record's
// checking).
type elem struct {
	list string
	i    int
}

func (e elem) at(field string) string { return index(e.list, e.i) + "." + field }

func validateExtension(f *apierr.Fields, e wire.Extension, el elem) {
	if e.Name == "" {
		f.Add(el.at("name"), "is required")
	}
	if e.Release != "" && !isRelease(e.Release) {
		checkRelease(f, el.at("release"), e.Release)
	}
	if e.RootHash != "" && !isHex(e.RootHash, 2, 128) {
		f.Add(el.at("rootHash"), "must be a dm-verity root hash in lowercase hex")
	}
}

func validatePackage(f *apierr.Fields, p wire.Package, el elem) {
	for _, kv := range [...][2]string{{"component", p.Component}, {"name", p.Name}, {"version", p.Version}} {
		if kv[1] == "" {
			f.Add(el.at(kv[0]), "is required")
		}
	}
}

func validatePin(f *apierr.Fields, p wire.Pin, el elem) {
	if p.Name == "" {
		f.Add(el.at("name"), "is required")
	}
	switch p.State {
	case wire.PinCurrent, wire.PinDiffers, wire.PinAbsent, wire.PinSelf:
	case "":
		f.Add(el.at("state"), "is required: current, differs, absent or self")
	default:
		f.Add(el.at("state"), "must be current, differs, absent or self, not %q", p.State)
	}
	if p.Containers < 0 {
		checkCount(f, el.at("containers"), p.Containers)
	}
}

func validateUnpinned(f *apierr.Fields, u wire.Unpinned, el elem) {
	if u.Image == "" {
		f.Add(el.at("image"), "is required")
	}
	if u.Containers < 0 {
		checkCount(f, el.at("containers"), u.Containers)
	}
}

func validatePayload(f *apierr.Fields, p wire.Payload, el elem) {
	if !isRelease(p.Release) {
		checkRelease(f, el.at("release"), p.Release)
	}
	if !isHex(p.SHA256, 64, 64) {
		f.Add(el.at("sha256"), "must be 64 lowercase hex digits")
	}
}

func validateStorage(f *apierr.Fields, s *wire.Storage, at string) {
	for i, r := range s.Releases {
		if isRelease(r.Release) && (r.Path == "" || cleanDir(r.Path)) && (r.OS == "" || cleanDir(r.OS)) {
			continue // nothing to say (the paths below are for a problem)
		}
		ra := index(at+".releases", i)
		checkRelease(f, ra+".release", r.Release)
		if r.Path != "" {
			checkDir(f, ra+".path", r.Path)
		}
		if r.OS != "" {
			checkDir(f, ra+".os", r.OS)
		}
	}
	for i, l := range s.Leftovers {
		if !cleanDir(l.Path) {
			checkDir(f, index(at+".leftovers", i)+".path", l.Path)
		}
	}
}

func index(at string, i int) string { return at + "[" + strconv.Itoa(i) + "]" }

func checkRelease(f *apierr.Fields, at, v string) {
	if v == "" {
		f.Add(at, "is required")
	} else if !isRelease(v) {
		f.Add(at, "must be a semantic version such as 0.2.0, not %q", v)
	}
}

// isRelease is checkRelease's rule, for the callers that test a value
// before they write its path out.
func isRelease(v string) bool { return v != "" && semver.Valid(v) == nil }

func checkDigest(f *apierr.Fields, at, v string) {
	if !isDigest(v) {
		f.Add(at, "must be sha256: followed by 64 lowercase hex digits")
	}
}

func checkLevel(f *apierr.Fields, at string, v *int) {
	if !isLevel(v) {
		f.Add(at, "must not be negative")
	}
}

// isLevel is checkLevel's rule: absent, or not negative.
func isLevel(v *int) bool { return v == nil || *v >= 0 }

func checkCount(f *apierr.Fields, at string, n int) {
	if n < 0 {
		f.Add(at, "must not be negative")
	}
}

// checkDir accepts a clean relative path under the upgrade directory.
func checkDir(f *apierr.Fields, at, p string) {
	if !cleanDir(p) {
		f.Add(at, "must be a clean path relative to /var/lib/stratum/upgrade")
	}
}

func cleanDir(p string) bool {
	return !(p == "" || p == "." || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../"))
}

func isDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	return ok && isHex(h, 64, 64)
}

func isCommit(s string) bool { return isHex(s, 4, 64) }

// isHex: between lo and hi lowercase hex digits.
func isHex(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
