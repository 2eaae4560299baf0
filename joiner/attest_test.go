package joiner

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"stratum/attest"
	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
	"stratum/tpm/tpmtest"
	"stratum/wire"
)

// attestingFounder is a fake founder that judges TPM claims and proofs
// with the founder's own checks.
func attestingFounder(t *testing.T) *fakefounder.Founder {
	f := fakefounder.New(t, fakefounder.Options{})
	var claim wire.AttestationClaim
	var ch attest.Challenge
	f.OnClaim = func(c wire.AttestationClaim) *wire.AttestationView {
		ev, err := attest.CheckClaim(c, nil, time.Now())
		if err != nil {
			t.Errorf("the joiner's claim: %v", err)
			return nil
		}
		if ch, err = attest.NewChallenge(rand.Reader, ev); err != nil {
			t.Error(err)
			return nil
		}
		claim = c
		return &wire.AttestationView{State: wire.AttestationChallenged, EKSHA256: ev.EKSHA256, EKChain: ev.EKChain, Challenge: &ch.AttestationChallenge}
	}
	f.OnProof = func(r *fakefounder.Reg, p wire.AttestationProof) *wire.AttestationView {
		v := *r.Attestation
		v.Challenge = nil
		if err := attest.VerifyProof(claim, ch, p, r.KeyPin); err != nil {
			v.State, v.Reason = wire.AttestationFailed, err.Error()
		} else {
			v.State = wire.AttestationVerified
		}
		return &v
	}
	return f
}

// A joiner with a TPM claims it at registration and answers the challenge
// exactly once, with a proof the founder's checks accept.
func TestJoinAttestsItsTPM(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	f := attestingFounder(t)
	delivery, _ := f.Delivery(t, "n-abc12def", "unseal-"+strings.Repeat("a", 16))
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.TPMPath = sock
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	o := out.String()
	contains(t, o, "TPM attestation: presenting the TPM's endorsement key")
	contains(t, o, "TPM attestation verified (EK ")
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if len(f.Proofs) != 1 {
		t.Fatalf("%d proofs posted, want 1", len(f.Proofs))
	}
	if a := f.Regs["j-test0001"].Attestation; a == nil || a.State != wire.AttestationVerified {
		t.Fatalf("attestation %+v", a)
	}
}

// A challenge the TPM cannot open is said once and not answered: the join
// goes on and a person decides, as without a TPM.
func TestJoinUnanswerableChallenge(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	f := fakefounder.New(t, fakefounder.Options{})
	f.OnClaim = func(wire.AttestationClaim) *wire.AttestationView {
		junk := bytes.Repeat([]byte{7}, 64)
		return &wire.AttestationView{State: wire.AttestationChallenged, EKSHA256: "00",
			Challenge: &wire.AttestationChallenge{CredentialBlob: junk, EncryptedSecret: junk, Nonce: junk[:32]}}
	}
	delivery, _ := f.Delivery(t, "n-abc12def", "unseal-"+strings.Repeat("b", 16))
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.TPMPath = sock
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "could not answer the attestation challenge"); n != 1 {
		t.Errorf("the failure was said %d times, want once:\n%s", n, out.String())
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if len(f.Proofs) != 0 {
		t.Errorf("%d proofs posted for a challenge the TPM could not open", len(f.Proofs))
	}
}

// Without a TPM the registration carries no claim, as before.
func TestJoinWithoutTPMClaimsNothing(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	delivery, _ := f.Delivery(t, "n-abc12def", "")
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.InsecureStoreUnsealKey = true
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	contains(t, out.String(), "registering without TPM attestation")
	if _, ok := f.Registers[0]["attestation"]; ok {
		t.Errorf("a registration without a TPM carries a claim: %v", f.Registers[0])
	}
}
