package tpm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"stratum/tpm/tpmtest"
)

// TestSwtpmFileRoundTrip drives the socket path end to end, as the joiner
// and the boot unseal service do: SealToFile, UnsealFile, then a PCR 7
// change that must lock the key away.
func TestSwtpmFileRoundTrip(t *testing.T) {
	sock := tpmtest.StartSwtpm(t)
	out := filepath.Join(t.TempDir(), "openbao-unseal.tpm")

	if err := SealToFile(sock, nil, testSecret, out); err != nil {
		t.Fatalf("SealToFile: %v", err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("blob mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := UnsealFile(sock, out)
	if err != nil || !bytes.Equal(got, testSecret) {
		t.Fatalf("UnsealFile = %q, %v", got, err)
	}

	tp, err := Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	tpmtest.ExtendPCR(t, tp, 7)
	assertNoHandles(t, tp)
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = UnsealFile(sock, out)
	if !errors.Is(err, ErrPolicyMismatch) || !NeedsRecovery(err) {
		t.Fatalf("UnsealFile after PCR 7 change = %v, want ErrPolicyMismatch", err)
	}
	if pcrs, err := SealedPCRs(out); err != nil || !slices.Equal(pcrs, DefaultPCRs) {
		t.Fatalf("SealedPCRs = %v, %v; want %v", pcrs, err, DefaultPCRs)
	}
}

// A blob sealed by one swtpm is refused by another (a new board), in a
// way callers recognise as "recover the secret another way".
func TestSwtpmOtherTPM(t *testing.T) {
	first, second := tpmtest.StartSwtpm(t), tpmtest.StartSwtpm(t)
	blob, err := SealVerified(first, []int{0, 7}, testSecret)
	if err != nil {
		t.Fatalf("SealVerified: %v", err)
	}
	out := filepath.Join(t.TempDir(), "sealed.tpm")
	if err := os.WriteFile(out, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = UnsealFile(second, out)
	if !errors.Is(err, ErrWrongTPM) || !NeedsRecovery(err) {
		t.Fatalf("UnsealFile on another TPM = %v, want ErrWrongTPM", err)
	}
	if NeedsRecovery(ErrNoTPM) {
		t.Error("a missing TPM is not a reason to recover")
	}
}
