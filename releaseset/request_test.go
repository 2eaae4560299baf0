package releaseset

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/strictjson"
	"stratum/wire"
)

// body is a valid request around baseRecord, re-encoded after edit (which
// works on the generic JSON, so tests can add what the types cannot hold).
func body(t *testing.T, edit func(req map[string]any)) []byte {
	t.Helper()
	b, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: *baseRecord()})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rel is the release object of a generic request; obj and arr walk it.
func rel(m map[string]any) map[string]any { return m["release"].(map[string]any) }
func obj(v any, k string) map[string]any  { return v.(map[string]any)[k].(map[string]any) }
func arr(v any, k string, i int) map[string]any {
	return v.(map[string]any)[k].([]any)[i].(map[string]any)
}

func TestDecodeRecordRequestRejects(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		// fields are the exact problem paths, in order.
		fields []string
	}{
		{"empty body", []byte(""), []string{""}},
		{"malformed", []byte(`{"release":`), []string{""}},
		{"trailing data", []byte(`{"release":{}} {}`), []string{""}},
		{"not an object", []byte(`[1,2]`), []string{""}},
		{"release missing", []byte(`{"runningRelease":"0.2.0"}`), []string{"release"}},
		{"release null", []byte(`{"release":null}`), []string{"release"}},
		{"unknown top-level field", body(t, func(m map[string]any) { m["bogus"] = 1 }), []string{"bogus"}},
		{"key case matters", body(t, func(m map[string]any) {
			m["RunningRelease"] = m["runningRelease"]
			delete(m, "runningRelease")
		}), []string{"RunningRelease"}},
		{"unknown nested fields", body(t, func(m map[string]any) {
			arr(rel(m), "pins", 1)["color"] = "red"
			obj(obj(rel(m), "bootc"), "booted")["extra"] = true
			obj(rel(m), "stored")["junk"] = []any{}
		}), []string{"release.bootc.booted.extra", "release.pins[1].color", "release.stored.junk"}},
		{"wrong types", body(t, func(m map[string]any) {
			rel(m)["imageMode"] = "yes"
			arr(rel(m), "pins", 0)["containers"] = 1.5
			rel(m)["packages"] = map[string]any{}
			obj(rel(m), "os")["kernel"] = 6
			rel(m)["hostReportedAt"] = "yesterday"
		}), []string{"release.hostReportedAt", "release.imageMode", "release.os.kernel", "release.packages", "release.pins[0].containers"}},
		{"every bad value at once", body(t, func(m map[string]any) {
			m["runningRelease"] = "v0.2"
			arr(rel(m), "pins", 2)["state"] = "weird"
			arr(rel(m), "pins", 1)["containers"] = -1
			obj(rel(m), "hostBinaries")["source"] = "disk"
			obj(rel(m), "hostBinaries")["commit"] = "HEAD"
			obj(obj(rel(m), "bootc"), "booted")["digest"] = "sha256:abc"
			obj(rel(m), "os")["kernelArgsDigest"] = "md5:00"
			rel(m)["unpinned"] = []any{map[string]any{"image": "busybox", "containers": -2}}
			arr(rel(m), "payloads", 0)["sha256"] = "XYZ"
		}), []string{
			"runningRelease", "release.os.kernelArgsDigest", "release.bootc.booted.digest",
			"release.hostBinaries.source", "release.hostBinaries.commit",
			"release.pins[1].containers", "release.pins[2].state", "release.unpinned[0].containers",
			"release.payloads[0].sha256",
		}},
		{"required parts", body(t, func(m map[string]any) {
			rel(m)["pins"] = []any{map[string]any{}, nil}
			rel(m)["packages"] = []any{map[string]any{"component": "podman"}}
			obj(rel(m), "hostBinaries")["source"] = ""
		}), []string{
			"release.hostBinaries.source",
			"release.packages[0].name", "release.packages[0].version",
			"release.pins[0].name", "release.pins[0].state", "release.pins[1].name", "release.pins[1].state",
		}},
		{"one package per component", body(t, func(m map[string]any) {
			rel(m)["packages"] = append(rel(m)["packages"].([]any), arr(rel(m), "packages", 0))
		}), []string{"release.packages[2].component"}},
		{"each checked field a fast check passes over, when bad", body(t, func(m map[string]any) {
			obj(rel(m), "os")["baseDigest"] = "sha256:xyz"
			obj(rel(m), "bootc")["staged"] = map[string]any{"digest": "sha256:" + strings.Repeat("a", 64)}
			obj(rel(m), "bootc")["rollback"] = map[string]any{"image": "x", "digest": "sha256:A"}
			obj(rel(m), "controlPlane")["compatSchemaLevel"] = -1
			obj(rel(m), "stored")["releases"] = []any{
				map[string]any{"release": "0.2.0", "path": "releases/0.2.0"},
				map[string]any{"release": "x", "path": "releases/0.2.0"},
				map[string]any{"release": "0.2.0", "os": "/os"},
			}
		}), []string{
			"release.os.baseDigest", "release.bootc.staged.image", "release.bootc.rollback.digest",
			"release.controlPlane.compatSchemaLevel", "release.stored.releases[1].release", "release.stored.releases[2].os",
		}},
		{"stored paths stay under the upgrade dir", body(t, func(m map[string]any) {
			obj(rel(m), "stored")["leftovers"] = []any{
				map[string]any{"path": "/etc"}, map[string]any{"path": "../x"}, map[string]any{"path": "os/./a"}, map[string]any{"path": "os/3f"},
			}
		}), []string{"release.stored.leftovers[0].path", "release.stored.leftovers[1].path", "release.stored.leftovers[2].path"}},
		{"a type problem hides the value checks under it", body(t, func(m map[string]any) {
			rel(m)["hostBinaries"] = "os-image"
			arr(rel(m), "pins", 0)["state"] = 3
		}), []string{"release.hostBinaries", "release.pins[0].state"}},
		{"time outside what JSON can encode in UTC", body(t, func(m map[string]any) {
			rel(m)["hostReportedAt"] = "9999-12-31T23:30:00-01:00"
		}), []string{"release.hostReportedAt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRecordRequest(tt.body)
			e, ok := apierr.As(err)
			if !ok || e.Code != apierr.InvalidInput {
				t.Fatalf("err = %v, want INVALID_INPUT", err)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Field)
				if f.Message == "" {
					t.Errorf("field %q has no message", f.Field)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.fields))
			if !slices.Equal(got, want) {
				t.Errorf("fields = %q, want %q", got, want)
			}
		})
	}
}

func TestDecodeRecordRequestAccepts(t *testing.T) {
	t.Run("the seed example's record", func(t *testing.T) {
		req, err := DecodeRecordRequest(seedRecordBody(t))
		if err != nil {
			t.Fatal(err)
		}
		r := req.Release
		if req.RunningRelease != "0.2.0" || r.OS.Kernel != "6.12.0-211.56.1.el10_2.x86_64" ||
			r.Bootc.Staged == nil || r.Pins[0].State != wire.PinCurrent || r.Stored.Leftovers[0].Path != "os/3f1c0d77" {
			t.Errorf("decoded %+v", req)
		}
		if r.HostReportedAt != nil {
			t.Errorf("hostReportedAt = %v, want nil when absent", r.HostReportedAt)
		}
	})
	t.Run("a base record round-trips", func(t *testing.T) {
		req, err := DecodeRecordRequest(body(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		want := *baseRecord()
		want.RecordedAt = time.Time{}
		if !reflect.DeepEqual(req.Release, want) {
			t.Errorf("decoded\n%+v\nwant\n%+v", req.Release, want)
		}
	})
	t.Run("recordedAt is ignored whatever it holds", func(t *testing.T) {
		for _, v := range []any{"2020-01-01T00:00:00Z", "not a time", 42, map[string]any{}} {
			req, err := DecodeRecordRequest(body(t, func(m map[string]any) { rel(m)["recordedAt"] = v }))
			if err != nil {
				t.Fatalf("recordedAt %v: %v", v, err)
			}
			if !req.Release.RecordedAt.IsZero() {
				t.Errorf("recordedAt %v kept as %v", v, req.Release.RecordedAt)
			}
		}
	})
	t.Run("null is absent, [] is empty, times are UTC", func(t *testing.T) {
		req, err := DecodeRecordRequest(body(t, func(m map[string]any) {
			m["runningRelease"] = ""
			rel(m)["hostReportedAt"] = "2026-07-01T14:00:00+02:00"
			rel(m)["pins"] = []any{}
			rel(m)["extensions"] = []any{}
			rel(m)["stored"] = nil
			rel(m)["bootc"] = nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		r := req.Release
		// pins is omitempty: [] is encoded as nothing, so it is nil.
		if r.Stored != nil || r.Bootc != nil || r.Pins != nil {
			t.Errorf("stored %v bootc %v pins %#v, want all nil", r.Stored, r.Bootc, r.Pins)
		}
		// SPEC 19: a collector that ran and found nothing is not one
		// never read.
		if r.Extensions == nil || len(r.Extensions) != 0 {
			t.Errorf("extensions %#v, want empty and not nil", r.Extensions)
		}
		if r.HostReportedAt == nil || !r.HostReportedAt.Equal(testNow) || r.HostReportedAt.Location() != time.UTC {
			t.Errorf("hostReportedAt = %v, want %v in UTC", r.HostReportedAt, testNow)
		}
		out, _ := json.Marshal(r)
		if !strings.Contains(string(out), `"hostReportedAt":"2026-07-01T12:00:00Z"`) || !strings.Contains(string(out), `"stored":null`) ||
			!strings.Contains(string(out), `"extensions":[]`) || strings.Contains(string(out), `"pins"`) {
			t.Errorf("re-encoded %s: want hostReportedAt in UTC, stored null, extensions [] and no pins", out)
		}
	})
	t.Run("prerelease and commit forms", func(t *testing.T) {
		_, err := DecodeRecordRequest(body(t, func(m map[string]any) {
			m["runningRelease"] = "1.0.0-rc.1+build.5"
			obj(rel(m), "hostBinaries")["commit"] = wire.CommitMixed
			obj(rel(m), "hostBinaries")["want"] = ""
		}))
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestDecodeRecordRequestCapsProblems(t *testing.T) {
	pins := make([]any, 3*strictjson.MaxProblems)
	for i := range pins {
		pins[i] = map[string]any{"name": "x", "state": "bogus"}
	}
	_, err := DecodeRecordRequest(body(t, func(m map[string]any) { rel(m)["pins"] = pins }))
	e, _ := apierr.As(err)
	if e == nil || len(e.Fields) != strictjson.MaxProblems+1 {
		t.Fatalf("err = %v, want %d problems and a count", err, strictjson.MaxProblems)
	}
	if last := e.Fields[strictjson.MaxProblems]; last.Field != "" || !strings.Contains(last.Message, "2000 more") {
		t.Errorf("last problem = %+v", last)
	}
}
