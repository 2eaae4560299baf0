package agent

import "testing"

// --api takes the replicas of an HA founder, every one https (the client's
// failover between them is apiclient's TestClientFailsOver).
func TestAPIBases(t *testing.T) {
	if b, err := apiBases("https://a:8443, https://b:8443"); err != nil || len(b) != 2 {
		t.Fatal(b, err)
	}
	if _, err := apiBases("https://a:8443,http://b:8443"); err == nil {
		t.Fatal("a plain-http replica was accepted")
	}
}
