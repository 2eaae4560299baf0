// Package tpm seals small secrets (the OpenBao unseal key) to this machine's
// TPM under a PCR policy, so a stolen disk or a tampered boot chain cannot
// recover them, and unseals them again at boot.
//
// It speaks to the TPM through go-tpm's pure-Go "direct" API so the stratum
// binary still builds with CGO_ENABLED=0.
package tpm
