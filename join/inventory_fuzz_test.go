package join

import (
	"strings"
	"testing"
)

// FuzzDecodeInventoryDocument: an inventory file is outside input (an
// operator's YAML or JSON, through the CLI and PUT /v1/admin/inventory).
// No panic; a refusal is INVALID_INPUT naming at least one field (the
// document itself is ""); an accepted document has no problems left, and
// its JSON decodes again to the same document.
func FuzzDecodeInventoryDocument(f *testing.F) {
	ek := strings.Repeat("ab", 32)
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `machines: []`, `{"machines": []}`, "machines:\n  - {}\n",
		"machines:\n  - match: {ekSha256: " + ek + "}\n    nodeId: n-rack0001\n    role: worker\n    mgmtIp: 10.0.0.5\n    networks: {storage: {ip: 10.9.0.5}}\n    labels: {topology.rack: r1}\n",
		`{"machines": [{"match": {"keyFingerprint": "sha256:` + ek + `"}, "nodeId": "n-rack0001", "role": "worker", "mgmtIp": "::ffff:10.0.0.5"}]}`,
		`{"machines": [{"match": {"ekSha256": "` + ek + `", "ekCertSha256": "x"}, "nodeId": 1}]}`,
		"a: &x [1]\nmachines: *x\n",
		"machines: [{match: {ekSha256: !!binary aGVsbG8=}}]\n",
		"machines:\n  - mgmtIp: .inf\n    nodeId: 0x1F\n    role: ~\n",
		"machines: []\n---\n",
		"? [a]\n: b\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, body, err := DecodeInventoryDocument(data)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if p := inventoryDocProblems(doc); len(p) > 0 {
			t.Fatalf("accepted a document with problems %v", p)
		}
		again, err := DecodeInventory(body)
		if err != nil {
			t.Fatalf("the JSON of an accepted document is refused: %v\n%s", err, body)
		}
		if string(mustMarshal(t, again)) != string(mustMarshal(t, doc)) {
			t.Fatalf("decoded twice differently:\n%s\n%s", mustMarshal(t, doc), mustMarshal(t, again))
		}
	})
}
