package cli

import (
	"bytes"
	"strings"
	"testing"

	"stratum/wire"
)

// joins get shows the TPM attestation's state, its reason when refused,
// and the EK hashes an inventory entry pins.
func TestWriteRegistrationAttestation(t *testing.T) {
	for _, tc := range []struct {
		a    *wire.AttestationView
		want []string
		not  []string
	}{
		{a: nil, not: []string{"TPM"}},
		{a: &wire.AttestationView{State: wire.AttestationVerified, EKChain: "verified", EKSHA256: "ab12", EKCertSHA256: "cd34"},
			want: []string{"TPM:", "verified (EK certificate chain verified)", "TPM EK:", "ab12", "TPM EK cert:", "cd34"}},
		{a: &wire.AttestationView{State: wire.AttestationFailed, Reason: "the quote is for another challenge", EKSHA256: "ab12"},
			want: []string{"failed: the quote is for another challenge"}, not: []string{"TPM EK cert"}},
		{a: &wire.AttestationView{State: wire.AttestationChallenged, EKSHA256: "ab12"}, want: []string{"challenged"}},
	} {
		var b bytes.Buffer
		r := wire.OperatorView{Registration: wire.Registration{JoinID: "j-1", State: wire.StatePending, Attestation: tc.a}}
		if err := writeRegistration(&b, r); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, b.String())
			}
		}
		for _, n := range tc.not {
			if strings.Contains(b.String(), n) {
				t.Errorf("output has %q:\n%s", n, b.String())
			}
		}
	}
}
