package join

import "stratum/wire"

// autoApprove is the inventory's decision on a registration whose TPM
// attestation was just judged (join/autoapprove.go replaces this stub):
// here nothing is approved without a person.
func (t *txn) autoApprove(r *record, ev *wire.AttestationView) (bool, error) {
	return false, nil
}
