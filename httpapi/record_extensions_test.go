package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// TestEmptyExtensionsAreNotUnread: a node whose systemd-sysext ran and
// found nothing records "extensions":[], and the release set shows it so;
// one that never read them shows null (SPEC 19, complete node records).
func TestEmptyExtensionsAreNotUnread(t *testing.T) {
	f, _ := newReleaseSetFixture(t)
	admin := f.login()
	node := f.member()
	for _, tc := range []struct {
		name       string
		extensions []wire.Extension
		want       string
	}{
		{"ran, found none", []wire.Extension{}, `"extensions":[]`},
		{"never read", nil, `"extensions":null`},
	} {
		rec := releasesettest.Record(1, 0)
		rec.Extensions = tc.extensions
		body, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: rec})
		if err != nil {
			t.Fatal(err)
		}
		if r := f.do(http.MethodPut, "/v1/cluster/nodes/"+node+"/release", admin, bytes.NewReader(body), 0); r.status != http.StatusNoContent {
			t.Fatalf("%s: PUT: %d %s", tc.name, r.status, r.body)
		}
		r := f.do(http.MethodGet, "/v1/admin/upgrades/release", admin, nil, 0)
		if r.status != http.StatusOK || !bytes.Contains([]byte(r.body), []byte(tc.want)) {
			t.Fatalf("%s: GET: %d, want %s in %.300s", tc.name, r.status, tc.want, r.body)
		}
	}
}
