// Package attest is the founder's side of TPM attestation for zero-touch
// enrollment. A joiner claims a TPM by its endorsement key (EK), the
// manufacturer's certificate of that EK, and an attestation key (AK) it
// created on the same TPM. The founder checks the claim, sends a credential
// challenge (TPM2_MakeCredential, done in software) that only the TPM
// holding the EK can open, and only for the AK it names, together with a
// fresh nonce. The joiner answers with the recovered secret and a quote
// signed by the AK over QualifyingData(nonce, registration key pin), which
// binds the TPM to the key the registration is pinned to.
//
// Every TPM structure is parsed and built by go-tpm; this package adds the
// rules: which keys are acceptable, what the certificate must certify,
// and what the quote must carry. It knows no HTTP and no store: the join
// service keeps the challenge and makes each nonce single-use.
package attest
