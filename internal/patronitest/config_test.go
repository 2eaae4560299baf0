package patronitest

import (
	"os"
	"strings"
	"testing"
)

// TestPatroniConfigDocumented: docs/HA.md shows the exact Patroni
// configuration the failover tests run (with a site's ports and paths).
func TestPatroniConfigDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/HA.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := ExampleConfig(); !strings.Contains(string(doc), want) {
		t.Fatalf("docs/HA.md does not show the tests' Patroni configuration; it should contain:\n%s", want)
	}
}
