package tpm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultPCRs is the policy used when the caller names none: PCR 7 holds the
// Secure Boot state, which survives ordinary kernel and initrd updates but
// changes when someone boots with Secure Boot off or with other keys.
var DefaultPCRs = []int{7}

// maxPCR is the highest PCR index the PC Client profile guarantees.
const maxPCR = 23

// ParsePCRs parses a flag value such as "7" or "0,7" into a sorted PCR list.
func ParsePCRs(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty PCR list")
	}
	var pcrs []int
	for field := range strings.SplitSeq(s, ",") {
		field = strings.TrimSpace(field)
		n, err := strconv.Atoi(field)
		if err != nil || n < 0 || n > maxPCR {
			return nil, fmt.Errorf("PCR %q is not a number from 0 to %d", field, maxPCR)
		}
		if slices.Contains(pcrs, n) {
			return nil, fmt.Errorf("PCR %d listed twice", n)
		}
		pcrs = append(pcrs, n)
	}
	slices.Sort(pcrs)
	return pcrs, nil
}

// normalizePCRs returns a sorted copy of pcrs, or DefaultPCRs when empty.
// Sorted order matters: the TPM hashes PCR values in ascending index order,
// and the blob stores them that way.
func normalizePCRs(pcrs []int) ([]int, error) {
	if len(pcrs) == 0 {
		return slices.Clone(DefaultPCRs), nil
	}
	out := slices.Clone(pcrs)
	slices.Sort(out)
	if err := checkPCRs(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkPCRs demands a non-empty, strictly ascending list of valid indices.
func checkPCRs(pcrs []int) error {
	if len(pcrs) == 0 {
		return fmt.Errorf("empty PCR list")
	}
	for i, p := range pcrs {
		if p < 0 || p > maxPCR {
			return fmt.Errorf("PCR %d is out of range 0..%d", p, maxPCR)
		}
		if i > 0 && p <= pcrs[i-1] {
			return fmt.Errorf("PCR list %v is not strictly ascending (duplicate?)", pcrs)
		}
	}
	return nil
}

// pcrHints tells the operator what usually moves a PCR, so a policy error
// points at a cause (TCG PC Client firmware profile assignments).
var pcrHints = map[int]string{
	0: "firmware code",
	1: "firmware configuration",
	2: "option ROM code",
	3: "option ROM configuration",
	4: "boot loader",
	5: "boot loader configuration and GPT",
	7: "Secure Boot state",
}

// describePCRs renders "PCR 7 (Secure Boot state ...)" for error messages.
func describePCRs(pcrs []int) string {
	parts := make([]string, len(pcrs))
	for i, p := range pcrs {
		parts[i] = fmt.Sprintf("PCR %d", p)
		if h, ok := pcrHints[p]; ok {
			parts[i] += " (" + h + ")"
		}
	}
	return strings.Join(parts, ", ")
}
