package join

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/attest"
	"stratum/tpm"
	"stratum/tpm/tpmtest"
	"stratum/wire"
)

// joinerTPM is a joiner's software TPM and its claim.
type joinerTPM struct {
	sock  string
	claim tpm.Claim
}

func newJoinerTPM(t *testing.T) *joinerTPM {
	t.Helper()
	sock := tpmtest.StartSwtpm(t)
	c, err := tpm.AttestationClaim(sock)
	if err != nil {
		t.Fatalf("AttestationClaim: %v", err)
	}
	return &joinerTPM{sock: sock, claim: c}
}

func (j *joinerTPM) wireClaim() *wire.AttestationClaim {
	return &wire.AttestationClaim{EKCert: j.claim.EKCert, EKPublic: j.claim.EKPublic, AKPublic: j.claim.AKPublic}
}

// answer is what the joiner's TPM answers to ch for the registration key pin.
func (j *joinerTPM) answer(t *testing.T, ch *wire.AttestationChallenge, pin string) wire.AttestationProof {
	t.Helper()
	if ch == nil {
		t.Fatal("no challenge in the joiner's view")
	}
	p, err := tpm.Answer(j.sock, j.claim, ch.CredentialBlob, ch.EncryptedSecret, attest.QualifyingData(ch.Nonce, pin))
	if err != nil {
		t.Fatalf("tpm.Answer: %v", err)
	}
	return wire.AttestationProof{Secret: p.Secret, Quote: p.Quote, Signature: p.Signature}
}

// fixtureClaim is a real TPM's public claim (attest's fixture), for tests
// that need a registration with a claim the founder accepts but no TPM to
// answer its challenge.
func fixtureClaim(t testing.TB) *wire.AttestationClaim {
	t.Helper()
	b, err := os.ReadFile("../attest/testdata/swtpm-claim.json")
	if err != nil {
		t.Fatal(err)
	}
	var c wire.AttestationClaim
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func (e *env) registerClaim(key string, c *wire.AttestationClaim) (wire.JoinerView, error) {
	v, _, err := e.svc.Register(keyPin(key), wire.RegisterRequest{Token: e.token("control-plane", 1), Release: clusterRelease,
		Hostname: "lab-" + key, MgmtIP: "192.0.2.99", Attestation: c})
	return v, err
}

func (e *env) auditKinds() []string {
	e.t.Helper()
	evs, err := e.db.AuditEvents(0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

func TestAttestationVerified(t *testing.T) {
	e := newEnv(t)
	j := newJoinerTPM(t)
	v, err := e.registerClaim("a", j.wireClaim())
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if v.State != wire.StatePending || v.Attestation == nil || v.Attestation.State != wire.AttestationChallenged || v.Attestation.Challenge == nil {
		t.Fatalf("registration view = %+v, want pending with a challenge", v)
	}
	if v.Attestation.EKChain != attest.ChainNone || len(v.Attestation.EKSHA256) != 64 {
		t.Errorf("attestation = %+v: want ekChain none and the EK hash", v.Attestation)
	}
	// The operator sees the claim's evidence, never the challenge.
	op, err := e.svc.Get(v.JoinID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Attestation == nil || op.Attestation.Challenge != nil || op.Attestation.EKSHA256 != v.Attestation.EKSHA256 {
		t.Fatalf("operator's attestation = %+v", op.Attestation)
	}
	if raw, _ := json.Marshal(op); bytes.Contains(raw, []byte("credentialBlob")) || bytes.Contains(raw, []byte("nonce")) {
		t.Fatalf("the operator's view carries the challenge: %s", raw)
	}
	// A re-read gives the same challenge: a joiner that restarts answers it.
	if again := e.view("a", v.JoinID); again.Attestation.Challenge == nil || !bytes.Equal(again.Attestation.Challenge.Nonce, v.Attestation.Challenge.Nonce) {
		t.Fatalf("re-read challenge = %+v", again.Attestation)
	}

	proof := j.answer(t, v.Attestation.Challenge, keyPin("a"))
	got, err := e.svc.Attest(keyPin("a"), v.JoinID, proof)
	if err != nil {
		t.Fatalf("Attest: %v", err)
	}
	a := got.Attestation
	if a == nil || a.State != wire.AttestationVerified || a.VerifiedAt.IsZero() || a.Challenge != nil {
		t.Fatalf("attestation after the proof = %+v", a)
	}
	if got.State != wire.StatePending {
		t.Errorf("state = %s: with no inventory a person still approves", got.State)
	}
	if kinds := e.auditKinds(); !slices.Contains(kinds, "join.attestation.verified") {
		t.Errorf("audit = %v, want join.attestation.verified", kinds)
	}

	// The nonce is spent: the same proof again is refused and changes nothing.
	before := e.auditCount()
	_, err = e.svc.Attest(keyPin("a"), v.JoinID, proof)
	wantCode(t, err, apierr.Conflict)
	if after := e.auditCount(); after != before {
		t.Errorf("a refused replay wrote %d audit events", after-before)
	}
	if v := e.view("a", v.JoinID); v.Attestation.State != wire.AttestationVerified {
		t.Errorf("after a replay the attestation is %s", v.Attestation.State)
	}
}

func TestAttestationFailed(t *testing.T) {
	e := newEnv(t)
	j := newJoinerTPM(t)
	other := newJoinerTPM(t)
	for _, tc := range []struct {
		name       string
		proof      func(v wire.JoinerView, key string) wire.AttestationProof
		wantReason string
	}{
		{name: "a quote for another key", wantReason: "another registration key",
			proof: func(v wire.JoinerView, key string) wire.AttestationProof {
				return j.answer(t, v.Attestation.Challenge, keyPin("someone else"))
			}},
		{name: "a wrong secret", wantReason: "does not answer the credential challenge",
			proof: func(v wire.JoinerView, key string) wire.AttestationProof {
				p := j.answer(t, v.Attestation.Challenge, keyPin(key))
				p.Secret = bytes.Repeat([]byte{1}, len(p.Secret))
				return p
			}},
		{name: "another TPM's quote", wantReason: "signature does not verify",
			proof: func(v wire.JoinerView, key string) wire.AttestationProof {
				// The other TPM recovers nothing for this EK; its quote is
				// what it can make, with the right secret copied in.
				ch := *v.Attestation.Challenge
				p := j.answer(t, &ch, keyPin(key))
				op := other.answerOwn(t, ch.Nonce, keyPin(key))
				p.Quote, p.Signature = op.Quote, op.Signature
				return p
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.NewReplacer(" ", "-", "'", "").Replace(tc.name)
			v, err := e.registerClaim(key, j.wireClaim())
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.svc.Attest(keyPin(key), v.JoinID, tc.proof(v, key))
			if err != nil {
				t.Fatalf("Attest: %v", err)
			}
			a := got.Attestation
			if a.State != wire.AttestationFailed || !strings.Contains(a.Reason, tc.wantReason) || a.Challenge != nil {
				t.Fatalf("attestation = %+v, want failed saying %q", a, tc.wantReason)
			}
			if got.State != wire.StatePending {
				t.Errorf("state = %s, want pending for a person", got.State)
			}
			// The challenge is spent: a good proof now is too late.
			_, err = e.svc.Attest(keyPin(key), v.JoinID, j.answer(t, v.Attestation.Challenge, keyPin(key)))
			wantCode(t, err, apierr.Conflict)
		})
	}
	if kinds := e.auditKinds(); !slices.Contains(kinds, "join.attestation.failed") {
		t.Errorf("audit = %v, want join.attestation.failed", kinds)
	}
}

// answerOwn is a quote of this TPM's own AK over a nonce, for a challenge
// it never received: what a machine can show for another's registration.
func (j *joinerTPM) answerOwn(t *testing.T, nonce []byte, pin string) wire.AttestationProof {
	t.Helper()
	ev, err := attest.CheckClaim(*j.wireClaim(), nil, testNow)
	if err != nil {
		t.Fatal(err)
	}
	own, err := attest.NewChallenge(randReader, ev)
	if err != nil {
		t.Fatal(err)
	}
	own.Nonce = nonce
	return j.answer(t, &own.AttestationChallenge, pin)
}

func TestAttestationRefusals(t *testing.T) {
	e := newEnv(t)
	j := newJoinerTPM(t)

	// A bad claim: the field is named and nothing is stored.
	bad := j.wireClaim()
	bad.AKPublic = bad.EKPublic
	tok := e.token("control-plane", 1)
	before := e.auditCount()
	_, _, err := e.svc.Register(keyPin("a"), wire.RegisterRequest{Token: tok, Release: clusterRelease, Hostname: "lab-a", Attestation: bad})
	wantCode(t, err, apierr.InvalidInput)
	if f := fieldNames(err); !slices.Equal(f, []string{"attestation"}) {
		t.Errorf("fields = %v, want attestation", f)
	}
	if after := e.auditCount(); after != before {
		t.Errorf("a refused claim wrote %d audit events", after-before)
	}
	if list, _ := e.svc.List(""); len(list) != 0 {
		t.Errorf("a refused claim stored %d registrations", len(list))
	}
	// The token was not spent: the same key registers with it.
	if _, _, err := e.svc.Register(keyPin("a"), wire.RegisterRequest{Token: tok, Release: clusterRelease, Hostname: "lab-a", Attestation: j.wireClaim()}); err != nil {
		t.Fatalf("the token after a refused claim: %v", err)
	}

	// Without a claim there is nothing to answer.
	plain := e.pending("b")
	_, err = e.svc.Attest(keyPin("b"), plain.JoinID, wire.AttestationProof{Secret: []byte{1}, Quote: []byte{1}, Signature: []byte{1}})
	wantCode(t, err, apierr.Conflict)
	if plain.Attestation != nil {
		t.Errorf("a registration without a claim shows an attestation: %+v", plain.Attestation)
	}

	// Another key's proof for a registration: 404, as for an unknown id.
	v, err := e.registerClaim("c", j.wireClaim())
	if err != nil {
		t.Fatal(err)
	}
	before = e.auditCount()
	_, err = e.svc.Attest(keyPin("intruder"), v.JoinID, j.answer(t, v.Attestation.Challenge, keyPin("intruder")))
	wantCode(t, err, apierr.NotFound)
	if after := e.auditCount(); after != before {
		t.Errorf("another key's proof wrote %d audit events", after-before)
	}
	if now := e.view("c", v.JoinID); now.Attestation.State != wire.AttestationChallenged {
		t.Errorf("another key's proof moved the attestation to %s", now.Attestation.State)
	}
	// A malformed proof is refused with its fields and spends nothing.
	_, err = e.svc.Attest(keyPin("c"), v.JoinID, wire.AttestationProof{})
	wantCode(t, err, apierr.InvalidInput)
	if now := e.view("c", v.JoinID); now.Attestation.State != wire.AttestationChallenged {
		t.Errorf("a malformed proof moved the attestation to %s", now.Attestation.State)
	}
}

func TestDecodeAttestationProof(t *testing.T) {
	for _, tc := range []struct {
		body       string
		wantFields []string
	}{
		{body: `{"secret":"AQ==","quote":"AQ==","signature":"AQ=="}`},
		{body: `{}`, wantFields: []string{"secret", "quote", "signature"}},
		{body: `{"secret":"AQ==","quote":"AQ==","signature":"AQ==","extra":1}`, wantFields: []string{"extra"}},
		{body: `{"secret":"not base64","quote":"AQ==","signature":"AQ=="}`, wantFields: []string{"secret"}},
	} {
		_, err := DecodeAttestationProof([]byte(tc.body))
		if len(tc.wantFields) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		wantCode(t, err, apierr.InvalidInput)
		if f := fieldNames(err); !slices.Equal(f, tc.wantFields) {
			t.Errorf("%s: fields %v, want %v", tc.body, f, tc.wantFields)
		}
	}
}

var (
	testNow    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	randReader = rand.Reader
)

func FuzzDecodeAttestationProof(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"secret":"AQ==","quote":"AQ==","signature":"AQ=="}`, `{"secret":null,"quote":"AQ==","signature":"AQ=="}`,
		`{"secret":"AQ==","quote":"AQ==","signature":"AQ==","nonce":"AQ=="}`, `{"secret":1}`, `[]`,
		`{"secret":"` + strings.Repeat("A", 48) + `","quote":"AQ==","signature":"AQ=="}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodeAttestationProof(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if problems := attest.ProofProblems(p); len(problems) > 0 {
			t.Fatalf("accepted a proof with problems %v", problems)
		}
		back, err := DecodeAttestationProof(mustMarshal(t, p))
		if err != nil || !bytes.Equal(back.Secret, p.Secret) || !bytes.Equal(back.Quote, p.Quote) || !bytes.Equal(back.Signature, p.Signature) {
			t.Fatalf("round trip: %+v -> %+v (%v)", p, back, err)
		}
	})
}

// A claim without its TPM is accepted and challenged, and stays so.
func TestAttestationFixtureClaim(t *testing.T) {
	e := newEnv(t)
	v, err := e.registerClaim("a", fixtureClaim(t))
	if err != nil || v.Attestation == nil || v.Attestation.State != wire.AttestationChallenged || v.Attestation.EKCertSHA256 == "" {
		t.Fatalf("register with the fixture claim: %+v %v", v.Attestation, err)
	}
}
