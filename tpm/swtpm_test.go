package tpm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
	extendPCR(t, tp, 7)
	assertNoHandles(t, tp)
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = UnsealFile(sock, out)
	if !errors.Is(err, ErrPolicyMismatch) {
		t.Fatalf("UnsealFile after PCR 7 change = %v, want ErrPolicyMismatch", err)
	}
}
