package founder

import (
	"encoding/json"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/internal/stratumtest"
	"stratum/release/releasetest"
	"stratum/wire"
)

// imported lists the founder's imported releases.
func imported(t *testing.T, op *stratumtest.Client) []wire.ImportedRelease {
	t.Helper()
	var out struct{ Releases []wire.ImportedRelease }
	op.Must(t, "GET", "/v1/admin/releases", nil, 200, &out)
	return out.Releases
}

// TestTrust10_ReimportOtherContent (SPEC 10.10) attacks an imported
// version: importing another tree under the same version is 409 CONFLICT
// and changes nothing (record, audit); with "replace": true it replaces
// it, audited with the content it replaced and who asked; the same
// content imports again without it (the repair of a corrupt file).
func TestTrust10_ReimportOtherContent(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	first := trustedTree(t, f, "0.3.0", 1<<20).Dir
	other := trustedTree(t, f, "0.3.0", 1<<20+1).Dir // its key trusted (audited) before the count below
	op.Must(t, "POST", "/v1/admin/releases", map[string]any{"path": first}, 201, nil)
	before := imported(t, op)
	events := func() []struct {
		Kind, Actor string
		Data        map[string]string
	} {
		var out struct {
			Events []struct {
				Kind, Actor string
				Data        map[string]string
			}
		}
		op.Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &out)
		return out.Events
	}
	auditBefore := len(events())

	for _, body := range []map[string]any{{"path": other}, {"path": other, "replace": false}} {
		e := op.Must(t, "POST", "/v1/admin/releases", body, 409, nil)
		if e.Code != apierr.Conflict || !strings.Contains(e.Message, `"replace": true`) {
			t.Fatalf("other content under 0.3.0: %+v", e)
		}
	}
	if after := imported(t, op); len(after) != 1 || after[0].ImportID != before[0].ImportID || after[0].ManifestSHA256 != before[0].ManifestSHA256 {
		t.Fatalf("a refused import changed the release: %+v", after)
	}
	if n := len(events()); n != auditBefore {
		t.Fatalf("a refused import wrote %d audit events", n-auditBefore)
	}

	op.Must(t, "POST", "/v1/admin/releases", map[string]any{"path": first}, 201, nil) // same content: no replace needed
	op.Must(t, "POST", "/v1/admin/releases", map[string]any{"path": other, "replace": true}, 201, nil)
	after := imported(t, op)
	if len(after) != 1 || after[0].ManifestSHA256 == before[0].ManifestSHA256 {
		t.Fatalf("replace did not replace: %+v", after)
	}
	evs := events()
	last := evs[len(evs)-1]
	if last.Kind != "release.imported" || last.Data["contentReplaced"] != "true" || last.Data["previousManifestSha256"] != before[0].ManifestSHA256 || last.Actor == "" {
		t.Fatalf("the replace is not audited with what it replaced and who: %+v", last)
	}
}

// TestTrust10_ImportPathNoOracle (SPEC 10.10) probes the founder's disk
// through the import endpoint: a missing path, a file, a FIFO, an empty
// or unreadable directory, a system directory, a payload that is a
// directory, a FIFO or a link out: every answer is the same 400 (code,
// message, fields), so none tells what exists; none hangs.
func TestTrust10_ImportPathNoOracle(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	trustedTree(t, f, "0.3.0", 1) // the founder trusts a release key
	probes := append(releasetest.UnreadableSources(t, t.TempDir()), "/etc/shadow", "/etc", "/proc/self", string(DataDir(f.Dir)))
	var first []byte
	for _, p := range probes {
		e := op.Must(t, "POST", "/v1/admin/releases", map[string]string{"path": p}, 400, nil)
		got, _ := json.Marshal(e)
		if first == nil {
			first = got
			if e.Code != apierr.InvalidInput || len(e.Fields) != 1 || e.Fields[0].Field != "path" {
				t.Fatalf("answer %s, want INVALID_INPUT naming path", got)
			}
		}
		if string(got) != string(first) {
			t.Errorf("%s answers %s, another path %s: the answers tell them apart", p, got, first)
		}
	}
	if list := imported(t, op); len(list) != 0 {
		t.Fatalf("probes imported %v", list)
	}
}
