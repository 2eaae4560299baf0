package tpm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// goldenBlob was sealed by version 1 of the format (to PCRs 0,7 of a
// simulator); it must keep parsing for as long as nodes carry such files.
func goldenBlob(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/sealed-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutate decodes the golden blob into a generic map, lets f change it and
// re-encodes it, so each case breaks exactly one thing.
func mutate(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(goldenBlob(t), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// publicBytes returns the golden public area for byte-level tampering.
func publicBytes(t *testing.T) []byte {
	t.Helper()
	var j blobJSON
	if err := json.Unmarshal(goldenBlob(t), &j); err != nil {
		t.Fatal(err)
	}
	return j.Public
}

func TestParseGoldenBlob(t *testing.T) {
	b, err := parseSealedBlob(goldenBlob(t))
	if err != nil {
		t.Fatalf("golden blob: %v", err)
	}
	if !reflect.DeepEqual(b.pcrs, []int{0, 7}) {
		t.Errorf("pcrs = %v", b.pcrs)
	}
}

func TestParseSealedBlobRejects(t *testing.T) {
	golden := goldenBlob(t)
	b64 := base64.StdEncoding.EncodeToString
	withUserAuth := publicBytes(t)
	withUserAuth[7] |= 0x40 // TPMA_OBJECT userWithAuth: a password path
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte("\x00\xffnot a blob at all")},
		{"JSON null", []byte("null")},
		{"JSON array", []byte("[]")},
		{"empty object", []byte("{}")},
		{"truncated in half", golden[:len(golden)/2]},
		{"truncated by one byte", bytes.TrimSpace(golden)[:len(bytes.TrimSpace(golden))-1]},
		{"trailing object", append(append([]byte{}, golden...), "{}"...)},
		{"oversized", append(bytes.Repeat([]byte(" "), maxBlobSize), golden...)},
		{"wrong type", mutate(t, func(m map[string]any) { m["type"] = "something.else" })},
		{"future version", mutate(t, func(m map[string]any) { m["version"] = 2 })},
		{"sha1 bank", mutate(t, func(m map[string]any) { m["pcr_bank"] = "sha1" })},
		{"unknown field", mutate(t, func(m map[string]any) { m["extra"] = true })},
		{"no PCRs", mutate(t, func(m map[string]any) { m["pcrs"] = []int{}; m["pcr_values"] = []string{} })},
		{"PCR 24", mutate(t, func(m map[string]any) { m["pcrs"] = []int{0, 24} })},
		{"PCRs out of order", mutate(t, func(m map[string]any) { m["pcrs"] = []int{7, 0} })},
		{"PCR value count", mutate(t, func(m map[string]any) { m["pcr_values"] = m["pcr_values"].([]any)[:1] })},
		{"PCR value not hex", mutate(t, func(m map[string]any) { m["pcr_values"].([]any)[0] = strings.Repeat("zz", 32) })},
		{"PCR value short", mutate(t, func(m map[string]any) { m["pcr_values"].([]any)[0] = "00" })},
		// The policy in the public area no longer matches: corrupted file.
		{"PCR value edited", mutate(t, func(m map[string]any) { m["pcr_values"].([]any)[1] = strings.Repeat("11", 32) })},
		{"SRK name short", mutate(t, func(m map[string]any) { m["srk_name"] = "000b00" })},
		{"SRK name not SHA-256", mutate(t, func(m map[string]any) { m["srk_name"] = "0004" + strings.Repeat("00", 32) })},
		{"no private", mutate(t, func(m map[string]any) { delete(m, "private") })},
		{"no public", mutate(t, func(m map[string]any) { delete(m, "public") })},
		{"public garbage", mutate(t, func(m map[string]any) { m["public"] = b64([]byte{0, 8, 0}) })},
		{"public trailing byte", mutate(t, func(m map[string]any) { m["public"] = b64(append(publicBytes(t), 0)) })},
		{"public with userWithAuth", mutate(t, func(m map[string]any) { m["public"] = b64(withUserAuth) })},
		{"private not base64", mutate(t, func(m map[string]any) { m["private"] = "!!" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSealedBlob(tt.data)
			if !errors.Is(err, errBadBlob) {
				t.Fatalf("parseSealedBlob error = %v, want errBadBlob", err)
			}
			t.Log(err)
		})
	}
}

// Unseal must refuse a damaged blob before touching the TPM, leaving
// nothing loaded.
func TestUnsealBadBlob(t *testing.T) {
	_, tp := openSim(t)
	real := mustSeal(t, tp, testSecret, nil)
	for name, data := range map[string][]byte{
		"garbage":   []byte("garbage"),
		"truncated": real[:len(real)-10],
		"empty":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Unseal(tp, data); !errors.Is(err, errBadBlob) {
				t.Fatalf("Unseal error = %v, want errBadBlob", err)
			}
			assertNoHandles(t, tp)
		})
	}
}

// FuzzParseSealedBlob checks the parser never panics and that whatever it
// accepts survives a marshal/parse round trip unchanged.
func FuzzParseSealedBlob(f *testing.F) {
	f.Add(goldenBlob(f))
	f.Add([]byte("{}"))
	f.Add([]byte(`{"type":"stratum.tpm.sealed","version":1,"pcr_bank":"sha256","pcrs":[7]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := parseSealedBlob(data)
		if err != nil {
			if b != nil {
				t.Fatal("parse returned a blob with an error")
			}
			return
		}
		out, err := b.marshal()
		if err != nil {
			t.Fatalf("marshal accepted blob: %v", err)
		}
		b2, err := parseSealedBlob(out)
		if err != nil {
			t.Fatalf("re-parse of marshalled blob: %v", err)
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip changed the blob:\n%+v\n%+v", b, b2)
		}
	})
}

// FuzzUnmarshalPublic aims straight at go-tpm's binary decoder, which the
// JSON layer of FuzzParseSealedBlob makes hard for the fuzzer to reach.
func FuzzUnmarshalPublic(f *testing.F) {
	var j blobJSON
	if err := json.Unmarshal(goldenBlob(f), &j); err != nil {
		f.Fatal(err)
	}
	f.Add(j.Public)
	f.Add([]byte{0, 1, 0, 11, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := unmarshalPublic(data)
		if err == nil && pub == nil {
			t.Fatal("nil public area without an error")
		}
	})
}
