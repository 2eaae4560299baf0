package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"stratum/wire"
)

// TestInventoryApply: apply reads YAML from stdin and sends the JSON the
// API takes; a document with problems is refused before anything is
// sent, each problem named by its field.
func TestInventoryApply(t *testing.T) {
	var sent []wire.Inventory
	api, ca := apiStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "PUT" || r.URL.Path != "/v1/admin/inventory" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		body, _ := io.ReadAll(r.Body)
		var doc wire.Inventory
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Errorf("the body is not the document's JSON: %v\n%s", err, body)
		}
		sent = append(sent, doc)
		v := wire.InventoryView{Machines: []wire.InventoryEntryView{}}
		for _, e := range doc.Machines {
			v.Machines = append(v.Machines, wire.InventoryEntryView{InventoryEntry: e, State: "expected"})
		}
		json.NewEncoder(w).Encode(v)
	})
	t.Setenv("STRATUM_TOKEN", "tok")
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), append(args, "--api", api, "--ca-file", ca), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	good := "machines:\n  - match: {ekSha256: " + strings.Repeat("AB", 32) + "}\n    nodeId: n-rack0001\n    role: worker\n    mgmtIp: 10.0.1.11\n"
	if code, out, errs := run(good, "inventory", "apply", "-f", "-"); code != 0 || !strings.Contains(out, "inventory applied: 1 machine") {
		t.Fatalf("apply: exit %d %q %q", code, out, errs)
	}
	if len(sent) != 1 || !strings.EqualFold(sent[0].Machines[0].Match.EKSHA256, strings.Repeat("ab", 32)) || sent[0].Machines[0].MgmtIP != "10.0.1.11" {
		t.Fatalf("sent %+v", sent)
	}
	bad := "machines:\n  - match: {ekSha256: abc}\n    nodeId: n-rack0001\n    role: gpu\n    mgmtIp: 10.0.1.11\n    rack: r1\n"
	code, _, errs := run(bad, "inventory", "apply", "-f", "-")
	for _, field := range []string{"machines[0].match.ekSha256", "machines[0].role", "machines[0].rack"} {
		if !strings.Contains(errs, field) {
			t.Errorf("the refusal does not name %s: %q", field, errs)
		}
	}
	if code == 0 || len(sent) != 1 {
		t.Errorf("a bad document: exit %d, %d sent", code, len(sent))
	}
}
