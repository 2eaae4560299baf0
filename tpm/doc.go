// Package tpm seals small secrets (a node's OpenBao unseal key, the
// founder's data key) to this machine's TPM under a PCR policy, so a stolen
// disk or a tampered boot chain cannot recover them, and unseals them again
// at boot. Joiner and founder share this one sealing path. A joiner also
// proves its TPM to the founder with it (attest.go): the EK and its
// certificate, an attestation key, credential activation and a quote.
//
// It speaks to the TPM through go-tpm's pure-Go "direct" API so the stratum
// binary still builds with CGO_ENABLED=0.
package tpm
