package joinflow

// TPM attestation of joiners (issue 33) on the real founder binary: a real
// `stratum join` proves its software TPM, and the attacks on the proof
// are refused: another machine's EK certificate, a replayed quote, a quote
// bound to another key, another key's proof.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"stratum/attest"
	"stratum/internal/stratumtest"
	"stratum/tpm"
	"stratum/tpm/tpmtest"
	"stratum/wire"
)

// attestRack is a founder trusting one TPM manufacturer and two
// machines' TPMs made by it.
type attestRack struct {
	f    *stratumtest.Founder
	a, b string // TPM sockets
}

func newAttestRack(t *testing.T) *attestRack {
	t.Helper()
	m := tpmtest.NewManufacturer(t)
	r := &attestRack{a: tpmtest.StartSwtpmWithEK(t, m), b: tpmtest.StartSwtpmWithEK(t, m)}
	bundle := filepath.Join(t.TempDir(), "ek-ca.pem")
	if err := os.WriteFile(bundle, m.CABundle(t), 0o600); err != nil {
		t.Fatal(err)
	}
	r.f = trustFounder(t, "0.2.0", "--ek-ca", bundle)
	return r
}

// registerWithClaim registers a new joiner key presenting claim.
func registerWithClaim(t *testing.T, f *stratumtest.Founder, key *stratumtest.JoinerKey, claim *wire.AttestationClaim) (*stratumtest.Client, wire.JoinerView) {
	t.Helper()
	c := f.Joiner(t, key)
	v := c.Register(t, wire.RegisterRequest{Token: joinToken(t, f, 1), Release: "0.2.0", Hostname: "lab-" + key.Pin[7:19], Attestation: claim}, http.StatusCreated)
	if v.Attestation == nil || v.Attestation.State != wire.AttestationChallenged || v.Attestation.Challenge == nil {
		t.Fatalf("registration with a TPM claim: %+v", v.Attestation)
	}
	return c, v
}

// TestTrust_Attestation shares one founder and one rack of TPMs (each
// TPM's manufacture takes a second or more) between its parts.
func TestTrust_Attestation(t *testing.T) {
	r := newAttestRack(t)
	t.Run("a joiner proves its TPM", func(t *testing.T) { testJoinerProvesItsTPM(t, r) })
	t.Run("attacks", func(t *testing.T) { testAttestationAttacks(t, r) })
}

// testJoinerProvesItsTPM: `stratum join --tpm` sends its claim, answers
// the challenge once, and the operator sees a verified TPM whose EK
// certificate chains to the manufacturer pool, without the challenge; the
// evidence is audited.
func testJoinerProvesItsTPM(t *testing.T, r *attestRack) {
	f := r.f
	work := t.TempDir()
	cmd := exec.Command(stratumtest.Binary(t), "join", "--founder", f.Join, "--token", joinToken(t, f, 1), "--ca-pin", f.Pin,
		"--release", "0.2.0", "--state-dir", filepath.Join(work, "state"), "--root", filepath.Join(work, "root"),
		"--hostname", "rack-a1", "--mgmt-ip", "192.0.2.31", "--tpm", r.a)
	cmd.Env = stratumtest.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })

	var op wire.OperatorView
	waitFor(t, 20*time.Second, "the joiner's TPM verified\n"+out.String(), func() bool {
		var list struct{ Registrations []wire.OperatorView }
		f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations", nil, 200, &list)
		for _, reg := range list.Registrations {
			if reg.Hostname == "rack-a1" && reg.Attestation != nil && reg.Attestation.State != wire.AttestationChallenged {
				op = reg
				return true
			}
		}
		return false
	})
	a := op.Attestation
	if a.State != wire.AttestationVerified || a.EKChain != attest.ChainVerified || a.VerifiedAt.IsZero() || a.Challenge != nil {
		t.Fatalf("operator's attestation = %+v\njoiner:\n%s", a, out.String())
	}
	claim, _ := stratumtest.TPMClaim(t, r.a)
	if sum := sha256.Sum256(claim.EKCert); a.EKCertSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("ekCertSha256 %s is not the hash of the TPM's EK certificate", a.EKCertSHA256)
	}
	if op.State != wire.StatePending {
		t.Errorf("state %s: without an inventory a person approves", op.State)
	}
	if kinds := auditKinds(t, f); !slices.Contains(kinds, "join.attestation.verified") {
		t.Errorf("audit %v lacks join.attestation.verified", kinds)
	}
	if o := out.String(); !strings.Contains(o, "TPM attestation verified") || strings.Count(o, "TPM attestation verified") != 1 {
		t.Errorf("joiner output:\n%s", o)
	}
}

// testAttestationAttacks performs the attacks on the real founder.
func testAttestationAttacks(t *testing.T, r *attestRack) {
	f := r.f
	kindsBefore := auditKinds(t, f)
	claimA, wireA := stratumtest.TPMClaim(t, r.a)
	_, wireB := stratumtest.TPMClaim(t, r.b)

	// Machine A registers and proves its TPM.
	keyA := stratumtest.NewJoinerKey(t)
	joinerA, vA := registerWithClaim(t, f, keyA, wireA)
	proofA := stratumtest.AnswerChallenge(t, r.a, claimA, vA.Attestation.Challenge, keyA.Pin)

	// Another key's proof for A's registration: 404, and nothing moves.
	intruder := f.Joiner(t, nil)
	if status, code, _ := intruder.Attest(t, vA.JoinID, proofA); status != 404 || code != "NOT_FOUND" {
		t.Fatalf("another key's proof: %d %s, want 404", status, code)
	}
	if status, _, v := joinerA.Attest(t, vA.JoinID, proofA); status != 200 || v.Attestation.State != wire.AttestationVerified {
		t.Fatalf("A's own proof: %d %+v", status, v.Attestation)
	}

	// A replayed quote: to the same registration (the nonce is spent) ...
	if status, code, _ := joinerA.Attest(t, vA.JoinID, proofA); status != 409 || code != "CONFLICT" {
		t.Fatalf("the same proof again: %d %s, want 409", status, code)
	}
	// ... and to a new registration claiming A's public TPM claim.
	keyR := stratumtest.NewJoinerKey(t)
	replayer, vR := registerWithClaim(t, f, keyR, wireA)
	if status, _, v := replayer.Attest(t, vR.JoinID, proofA); status != 200 || v.Attestation.State != wire.AttestationFailed || v.State != wire.StatePending {
		t.Fatalf("a replayed proof: %d %+v (state %s), want failed and pending", status, v.Attestation, v.State)
	}

	// A quote of A's real TPM bound to another key (a relayed challenge).
	keyQ := stratumtest.NewJoinerKey(t)
	relayer, vQ := registerWithClaim(t, f, keyQ, wireA)
	relayed := stratumtest.AnswerChallenge(t, r.a, claimA, vQ.Attestation.Challenge, keyA.Pin)
	if _, _, v := relayer.Attest(t, vQ.JoinID, relayed); v.Attestation.State != wire.AttestationFailed || !strings.Contains(v.Attestation.Reason, "another registration key") {
		t.Fatalf("a quote bound to another key: %+v", v.Attestation)
	}

	// Machine A presenting B's EK certificate with its own EK: refused at
	// registration, the field named, nothing stored.
	forged := *wireA
	forged.EKCert = wireB.EKCert
	before := len(auditKinds(t, f))
	tok := joinToken(t, f, 1)
	var bad struct {
		Fields []struct{ Field string }
	}
	status, aerr, err := f.Joiner(t, nil).Do("POST", "/v1/join/registrations", wire.RegisterRequest{Token: tok, Release: "0.2.0", Hostname: "lab-forged", Attestation: &forged}, &bad)
	if err != nil || status != 400 || aerr == nil || len(aerr.Fields) != 1 || aerr.Fields[0].Field != "attestation" {
		t.Fatalf("another machine's EK certificate on its own EK: %d %+v %v", status, aerr, err)
	}
	if after := len(auditKinds(t, f)); after != before+1 { // +1: the token's creation
		t.Errorf("a refused claim wrote %d audit events", after-before-1)
	}

	// Machine A presenting B's whole public claim (B's EK and its
	// certificate, which chains to the pool) with A's AK: the challenge
	// is sealed to B's EK, which A's TPM does not hold, so the best A can
	// send is a guess of the secret with a real quote of its own AK.
	stolen := &wire.AttestationClaim{EKCert: wireB.EKCert, EKPublic: wireB.EKPublic, AKPublic: wireA.AKPublic}
	keyS := stratumtest.NewJoinerKey(t)
	thief, vS := registerWithClaim(t, f, keyS, stolen)
	if vS.Attestation.EKChain != attest.ChainVerified {
		t.Fatalf("B's certificate should chain to the pool: %+v", vS.Attestation)
	}
	if _, err := tpm.Answer(r.a, tpm.Claim{EKCert: stolen.EKCert, EKPublic: stolen.EKPublic, AKPublic: stolen.AKPublic},
		vS.Attestation.Challenge.CredentialBlob, vS.Attestation.Challenge.EncryptedSecret, nil); err == nil {
		t.Fatal("TPM A answered a challenge sealed to B's EK")
	}
	own := stratumtest.AnswerChallenge(t, r.a, claimA, freshChallenge(t, f, wireA).Attestation.Challenge, keyS.Pin)
	guess := wire.AttestationProof{Secret: bytes.Repeat([]byte{0x5a}, attest.SecretSize), Quote: own.Quote, Signature: own.Signature}
	_, _, v := thief.Attest(t, vS.JoinID, guess)
	if v.Attestation.State != wire.AttestationFailed || v.State != wire.StatePending {
		t.Fatalf("another machine's EK certificate: %+v (state %s), want failed, not approved", v.Attestation, v.State)
	}
	kinds := auditKinds(t, f)[len(kindsBefore):]
	if n := countOf(kinds, "join.attestation.failed"); n != 3 {
		t.Errorf("%d join.attestation.failed events, want 3 (replay, relay, stolen EK)", n)
	}
	if n := countOf(kinds, "join.attestation.verified"); n != 1 {
		t.Errorf("%d join.attestation.verified events, want 1", n)
	}
}

// freshChallenge is a fresh challenge for A's claim on a registration of its own,
// whose nonce A's TPM quotes for the thief's key.
func freshChallenge(t *testing.T, f *stratumtest.Founder, claim *wire.AttestationClaim) wire.JoinerView {
	t.Helper()
	_, v := registerWithClaim(t, f, stratumtest.NewJoinerKey(t), claim)
	return v
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestAttestation_EKCAFlag: a manufacturer pool that cannot be read, or
// is no CA bundle, stops `stratum serve` before it starts, by the flag or
// its environment twin.
func TestAttestation_EKCAFlag(t *testing.T) {
	dir := t.TempDir()
	notCA := filepath.Join(dir, "not-ca.pem")
	if err := os.WriteFile(notCA, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		env  []string
		args []string
		want string
	}{
		"missing file": {args: []string{"--ek-ca", filepath.Join(dir, "missing.pem")}, want: "--ek-ca"},
		"not a bundle": {args: []string{"--ek-ca", notCA}, want: "not PEM"},
		"env twin":     {env: []string{"STRATUM_EK_CA=" + notCA}, want: "not PEM"},
	} {
		t.Run(name, func(t *testing.T) {
			r := stratumtest.Run(t, tc.env, append([]string{"serve", "--dev", "--data", filepath.Join(dir, name)}, tc.args...)...)
			if r.Code != 2 || !strings.Contains(r.Stdout+r.Stderr, tc.want) {
				t.Fatalf("exit %d, want 2 saying %q:\n%s%s", r.Code, tc.want, r.Stdout, r.Stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				t.Error("a refused start created the data directory")
			}
		})
	}
}
