package tpm

import (
	"crypto/sha256"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// pcrSelection selects pcrs in the SHA-256 bank, the only bank stratum uses:
// SHA-1 banks are being retired and every TPM 2.0 has SHA-256.
func pcrSelection(pcrs []int) tpm2.TPMLPCRSelection {
	idx := make([]uint, len(pcrs))
	for i, p := range pcrs {
		idx[i] = uint(p)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash:      tpm2.TPMAlgSHA256,
		PCRSelect: tpm2.PCClientCompatible.PCRs(idx...),
	}}}
}

// readPCRs returns the SHA-256 value of each PCR in pcrs (ascending), in the
// same order. It loops because a TPM answers at most eight PCRs per
// PCR_Read and says which ones it answered.
func readPCRs(t transport.TPM, pcrs []int) ([][]byte, error) {
	got := make(map[int][]byte, len(pcrs))
	for {
		var missing []int
		for _, p := range pcrs {
			if _, ok := got[p]; !ok {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			break
		}
		rsp, err := tpm2.PCRRead{PCRSelectionIn: pcrSelection(missing)}.Execute(t)
		if err != nil {
			return nil, fmt.Errorf("read TPM PCRs %v: %w", missing, err)
		}
		answered := selectedPCRs(rsp.PCRSelectionOut)
		if len(answered) == 0 {
			return nil, fmt.Errorf("the TPM's SHA-256 bank does not hold PCRs %v", missing)
		}
		if len(answered) != len(rsp.PCRValues.Digests) {
			return nil, fmt.Errorf("PCR_Read answered %d PCRs with %d values", len(answered), len(rsp.PCRValues.Digests))
		}
		for i, p := range answered {
			d := rsp.PCRValues.Digests[i].Buffer
			if len(d) != sha256.Size {
				return nil, fmt.Errorf("PCR %d value is %d bytes, want %d", p, len(d), sha256.Size)
			}
			got[p] = d
		}
	}
	out := make([][]byte, len(pcrs))
	for i, p := range pcrs {
		out[i] = got[p]
	}
	return out, nil
}

// selectedPCRs lists, ascending, the SHA-256 PCRs a selection names.
func selectedPCRs(sel tpm2.TPMLPCRSelection) []int {
	var out []int
	for _, s := range sel.PCRSelections {
		if s.Hash != tpm2.TPMAlgSHA256 {
			continue
		}
		for byteIdx, b := range s.PCRSelect {
			for bit := range 8 {
				if b&(1<<bit) != 0 {
					out = append(out, byteIdx*8+bit)
				}
			}
		}
	}
	return out
}

// pcrPolicy returns the composite PCR digest (what PolicyPCR checks) and the
// policy digest a sealed object carries for "these PCRs hold these values".
// The values must be in ascending PCR order, as the TPM hashes them.
func pcrPolicy(pcrs []int, values [][]byte) (composite, policy []byte, err error) {
	h := sha256.New()
	for _, v := range values {
		h.Write(v)
	}
	composite = h.Sum(nil)
	calc, err := tpm2.NewPolicyCalculator(tpm2.TPMAlgSHA256)
	if err != nil {
		return nil, nil, err
	}
	pp := tpm2.PolicyPCR{PcrDigest: tpm2.TPM2BDigest{Buffer: composite}, Pcrs: pcrSelection(pcrs)}
	if err := pp.Update(calc); err != nil {
		return nil, nil, err
	}
	return composite, calc.Hash().Digest, nil
}
