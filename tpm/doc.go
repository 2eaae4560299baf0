// Package tpm seals small secrets (a node's OpenBao unseal key, the
// founder's data key) to this machine's TPM under a PCR policy, so a stolen
// disk or a tampered boot chain cannot recover them, and unseals them again
// at boot. Joiner and founder share this one sealing path.
//
// It speaks to the TPM through go-tpm's pure-Go "direct" API so the stratum
// binary still builds with CGO_ENABLED=0.
package tpm
