package tpm

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2/transport"

	"stratum/tpm/tpmtest"
)

var testSecret = []byte("s.UnsealKeyBase64AAAAAAAAAAAAAAAAAAAAAAAAAA=")

func TestSealUnsealRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		pcrFlag  string // as given to --pcrs; empty means Seal's default
		wantPCRs []int
	}{
		{"default PCR 7", "", []int{7}},
		{"PCRs 0,7", "0,7", []int{0, 7}},
		{"unsorted flag", "7,0", []int{0, 7}},
		// More than eight PCRs needs several PCR_Read calls.
		{"ten PCRs", "0,1,2,3,4,5,6,7,8,9", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pcrs []int
			if tt.pcrFlag != "" {
				var err error
				if pcrs, err = ParsePCRs(tt.pcrFlag); err != nil {
					t.Fatal(err)
				}
			}
			_, tp := openSim(t)
			blob := mustSeal(t, tp, testSecret, pcrs)
			assertNoHandles(t, tp)

			var j blobJSON
			if err := json.Unmarshal(blob, &j); err != nil {
				t.Fatalf("blob is not JSON: %v", err)
			}
			if j.Version != blobVersion || !slices.Equal(j.PCRs, tt.wantPCRs) {
				t.Errorf("blob version %d pcrs %v, want %d %v", j.Version, j.PCRs, blobVersion, tt.wantPCRs)
			}
			if bytes.Contains(blob, testSecret) {
				t.Error("blob contains the plaintext secret")
			}

			got, err := Unseal(tp, blob)
			if err != nil {
				t.Fatalf("Unseal: %v", err)
			}
			if !bytes.Equal(got, testSecret) {
				t.Errorf("Unseal = %q, want %q", got, testSecret)
			}
			assertNoHandles(t, tp)
		})
	}
}

func TestUnsealAfterPCRChange(t *testing.T) {
	tests := []struct {
		name        string
		sealPCRs    []int
		extend      int
		wantErr     error
		wantChanged string // PCR the message must name
		notChanged  string // PCR the message must not name
	}{
		{"PCR 7 extended", nil, 7, ErrPolicyMismatch, "PCR 7 (Secure Boot state)", ""},
		{"PCR 0 of 0,7 extended", []int{0, 7}, 0, ErrPolicyMismatch, "PCR 0", "PCR 7"},
		{"PCR 7 of 0,7 extended", []int{0, 7}, 7, ErrPolicyMismatch, "PCR 7", "PCR 0"},
		{"unsealed PCR extended", []int{7}, 0, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tp := openSim(t)
			blob := mustSeal(t, tp, testSecret, tt.sealPCRs)
			tpmtest.ExtendPCR(t, tp, tt.extend)

			got, err := Unseal(tp, blob)
			assertNoHandles(t, tp)
			if tt.wantErr == nil {
				if err != nil || !bytes.Equal(got, testSecret) {
					t.Fatalf("Unseal = %q, %v; want the secret", got, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Unseal error = %v, want %v", err, tt.wantErr)
			}
			if got != nil {
				t.Error("Unseal returned data along with the error")
			}
			msg := err.Error()
			t.Logf("message: %s", msg)
			for _, want := range []string{tt.wantChanged, "changed since"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q", want)
				}
			}
			if tt.notChanged != "" && strings.Contains(msg, tt.notChanged) {
				t.Errorf("message names unchanged %s", tt.notChanged)
			}
			if strings.Contains(msg, string(testSecret)) {
				t.Error("message contains the secret")
			}
		})
	}
}

// A reboot resets the PCRs to the same boot measurements, so the key must
// still come out: this is the normal boot-time path.
func TestUnsealAfterReboot(t *testing.T) {
	sim, tp := openSim(t)
	blob := mustSeal(t, tp, testSecret, []int{0, 7})
	if err := sim.Reset(); err != nil {
		t.Fatal(err)
	}
	got, err := Unseal(tp, blob)
	if err != nil || !bytes.Equal(got, testSecret) {
		t.Fatalf("Unseal after reboot = %q, %v", got, err)
	}
}

func TestUnsealOnAnotherTPM(t *testing.T) {
	sim, tp := openSim(t)
	blob := mustSeal(t, tp, testSecret, nil)
	// New hierarchy seeds: as good as another machine's TPM.
	if err := sim.ManufactureReset(); err != nil {
		t.Fatal(err)
	}
	_, err := Unseal(tp, blob)
	if !errors.Is(err, ErrWrongTPM) {
		t.Fatalf("Unseal error = %v, want ErrWrongTPM", err)
	}
	assertNoHandles(t, tp)
}

func TestSealRejects(t *testing.T) {
	tests := []struct {
		name   string
		secret []byte
		pcrs   []int
	}{
		{"empty secret", nil, nil},
		{"secret over 128 bytes", bytes.Repeat([]byte("k"), 129), nil},
		{"PCR 24", testSecret, []int{24}},
		{"negative PCR", testSecret, []int{-1}},
		{"duplicate PCR", testSecret, []int{7, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tp := openSim(t)
			if _, err := Seal(tp, tt.secret, tt.pcrs); err == nil {
				t.Fatal("Seal succeeded")
			}
			assertNoHandles(t, tp)
		})
	}
}

func TestSealMaxSecret(t *testing.T) {
	_, tp := openSim(t)
	secret := bytes.Repeat([]byte{0xa5}, maxSecret)
	got, err := Unseal(tp, mustSeal(t, tp, secret, nil))
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Unseal = %x, %v", got, err)
	}
}

// recorder keeps every byte exchanged with the TPM.
type recorder struct {
	tp      transport.TPM
	traffic bytes.Buffer
}

func (r *recorder) Send(cmd []byte) ([]byte, error) {
	r.traffic.Write(cmd)
	rsp, err := r.tp.Send(cmd)
	r.traffic.Write(rsp)
	return rsp, err
}

// The sessions are salted and encrypted so that someone sniffing the TPM
// bus (an interposer on LPC/SPI) never sees the key in either direction.
func TestSecretNeverCrossesTheBusInClear(t *testing.T) {
	_, tp := openSim(t)
	rec := &recorder{tp: tp}
	blob := mustSeal(t, rec, testSecret, nil)
	got, err := Unseal(rec, blob)
	if err != nil || !bytes.Equal(got, testSecret) {
		t.Fatalf("Unseal = %q, %v", got, err)
	}
	if bytes.Contains(rec.traffic.Bytes(), testSecret) {
		t.Error("the secret crossed the TPM interface in clear")
	}
}
