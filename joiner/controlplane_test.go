package joiner

import (
	"encoding/json"
	"testing"

	"stratum/buildinfo"
	"stratum/wire"
)

func TestControlPlaneJSON(t *testing.T) {
	lvl, compat := 12, 10
	cluster := &wire.ControlPlane{Version: "0.6.0", Commit: "4298b2fe", SchemaLevel: &lvl, CompatSchemaLevel: &compat}
	for _, tt := range []struct {
		name, role string
		self       buildinfo.Info
		want       string // "" for no file
	}{
		{"worker runs none", "worker", buildinfo.Info{Version: "0.6.0", Commit: "4298b2fe"}, ""},
		{"postgres runs none", "postgres", buildinfo.Info{Version: "0.6.0", Commit: "4298b2fe"}, ""},
		{"same build: the cluster's schema levels", "control-plane", buildinfo.Info{Version: "0.6.0", Commit: "4298b2fe"},
			`{"version":"0.6.0","commit":"4298b2fe","schemaLevel":12,"compatSchemaLevel":10}`},
		{"another build: levels unknown", "control-plane", buildinfo.Info{Version: "0.6.1", Commit: "aaaabbbb"},
			`{"version":"0.6.1","commit":"aaaabbbb"}`},
		{"no commit: unknown, never the cluster's", "control-plane", buildinfo.Info{Version: "dev", Commit: "unknown"},
			`{"version":"dev","commit":"unknown"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := controlPlaneJSON(tt.role, cluster, tt.self)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if b != nil {
					t.Fatalf("a %s node gets control-plane.json: %s", tt.role, b)
				}
				return
			}
			var got, want any
			_ = json.Unmarshal(b, &got)
			_ = json.Unmarshal([]byte(tt.want), &want)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Fatalf("got %s, want %s", gb, wb)
			}
		})
	}
}
