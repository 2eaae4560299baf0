package crypto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func newRecovery(t testing.TB) (*RecoveryKey, *DataKey, []byte) {
	t.Helper()
	rk, err := NewRecoveryKey()
	if err != nil {
		t.Fatal(err)
	}
	dk, err := GenerateDataKey()
	if err != nil {
		t.Fatal(err)
	}
	file, err := WrapDataKey(dk, rk)
	if err != nil {
		t.Fatal(err)
	}
	return rk, dk, file
}

var recoveryShape = regexp.MustCompile(`^stratum-rk1-[A-Z2-7]{4}(-[A-Z2-7]{4}){13}$`)

func TestRecoveryKeyRoundTrip(t *testing.T) {
	rk, dk, file := newRecovery(t)
	printed := rk.Reveal()
	if !recoveryShape.MatchString(printed) {
		t.Fatalf("printed recovery key %q has the wrong shape", printed)
	}
	if bytes.Contains(file, []byte(printed)) || bytes.Contains(file, rk.key) || bytes.Contains(file, dk.key) {
		t.Fatal("the recovery file holds the recovery key or the data key in clear")
	}
	for name, typed := range map[string]string{
		"as printed":        printed,
		"lower case":        strings.ToLower(printed),
		"spaces not dashes": strings.ReplaceAll(printed, "-", " "),
		"no group dashes":   "stratum-rk1-" + strings.ReplaceAll(strings.TrimPrefix(printed, "stratum-rk1-"), "-", ""),
		"surrounding space": "  " + printed + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			parsed, err := ParseRecoveryKey(typed)
			if err != nil {
				t.Fatalf("ParseRecoveryKey: %v", err)
			}
			got, err := UnwrapDataKey(file, parsed)
			if err != nil {
				t.Fatalf("UnwrapDataKey: %v", err)
			}
			if !got.Equal(dk) {
				t.Fatal("unwrapped a different data key")
			}
		})
	}
}

func TestRecoveryKeyNeverPrinted(t *testing.T) {
	rk, dk, _ := newRecovery(t)
	for _, s := range []string{fmt.Sprint(rk), fmt.Sprintf("%v %+v %s", rk, rk, rk), fmt.Sprint(dk), fmt.Sprintf("%v %s", dk, dk)} {
		if strings.Contains(s, rk.Reveal()) || strings.Contains(s, fmt.Sprint(rk.key)) || strings.Contains(s, fmt.Sprint(dk.key)) {
			t.Fatalf("formatting shows key material: %q", s)
		}
	}
}

func TestParseRecoveryKeyRejects(t *testing.T) {
	rk, _, _ := newRecovery(t)
	printed := rk.Reveal()
	// Change one character of the body to another valid base32 letter.
	body := []byte(printed)
	i := len("stratum-rk1-") + 5
	if body[i] == 'A' {
		body[i] = 'B'
	} else {
		body[i] = 'A'
	}
	tests := []struct {
		name  string
		input string
		want  error
	}{
		{"empty", "", ErrRecoveryKeyFormat},
		{"no prefix", strings.TrimPrefix(printed, "stratum-rk1-"), ErrRecoveryKeyFormat},
		{"other prefix", "stratum-rk2-" + strings.TrimPrefix(printed, "stratum-rk1-"), ErrRecoveryKeyFormat},
		{"one group short", printed[:len(printed)-5], ErrRecoveryKeyFormat},
		{"one group more", printed + "-AAAA", ErrRecoveryKeyFormat},
		{"digit 0 (not base32)", printed[:len(printed)-1] + "0", ErrRecoveryKeyFormat},
		{"an age key", "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ", ErrRecoveryKeyFormat},
		{"one character mistyped", string(body), ErrRecoveryKeyTypo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRecoveryKey(tt.input)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseRecoveryKey error = %v, want %v", err, tt.want)
			}
			if tt.input != "" && strings.Contains(err.Error(), strings.TrimPrefix(tt.input, "stratum-rk1-")) {
				t.Fatal("the error quotes the input")
			}
		})
	}
}

func TestUnwrapDataKeyRejects(t *testing.T) {
	rk, _, file := newRecovery(t)
	other, _, _ := newRecovery(t)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(file, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	var parsed recoveryFile
	if err := json.Unmarshal(file, &parsed); err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), parsed.WrappedKey...)
	flipped[len(flipped)-1] ^= 1
	otherSalt := append([]byte(nil), parsed.Salt...)
	otherSalt[0] ^= 1
	tests := []struct {
		name string
		file []byte
		key  *RecoveryKey
		want error
	}{
		{"another recovery key", file, other, ErrWrongRecoveryKey},
		{"wrapped key tampered", edit(func(m map[string]any) { m["wrapped_key"] = flipped }), rk, ErrWrongRecoveryKey},
		{"salt tampered", edit(func(m map[string]any) { m["salt"] = otherSalt }), rk, ErrWrongRecoveryKey},
		{"empty file", nil, rk, ErrBadRecoveryFile},
		{"truncated", file[:len(file)/2], rk, ErrBadRecoveryFile},
		{"trailing data", append(append([]byte(nil), file...), "{}"...), rk, ErrBadRecoveryFile},
		{"wrong type", edit(func(m map[string]any) { m["type"] = "stratum.tpm.sealed" }), rk, ErrBadRecoveryFile},
		{"future version", edit(func(m map[string]any) { m["version"] = 2 }), rk, ErrBadRecoveryFile},
		{"other kdf", edit(func(m map[string]any) { m["kdf"] = "argon2id" }), rk, ErrBadRecoveryFile},
		{"unknown field", edit(func(m map[string]any) { m["hint"] = "x" }), rk, ErrBadRecoveryFile},
		{"short salt", edit(func(m map[string]any) { m["salt"] = []byte{1, 2} }), rk, ErrBadRecoveryFile},
		{"short wrapped key", edit(func(m map[string]any) { m["wrapped_key"] = flipped[:20] }), rk, ErrBadRecoveryFile},
		{"oversized", append(bytes.Repeat([]byte(" "), maxRecoveryFile), file...), rk, ErrBadRecoveryFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dk, err := UnwrapDataKey(tt.file, tt.key)
			if !errors.Is(err, tt.want) || dk != nil {
				t.Fatalf("UnwrapDataKey = %v, %v; want %v", dk, err, tt.want)
			}
		})
	}
}

// FuzzParseRecoveryKey: whatever is accepted prints back to a key that
// parses to the same bytes.
func FuzzParseRecoveryKey(f *testing.F) {
	rk, _, _ := newRecovery(f)
	f.Add(rk.Reveal())
	f.Add("stratum-rk1-")
	f.Add("stratum-rk1-AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseRecoveryKey(s)
		if err != nil {
			return
		}
		k2, err := ParseRecoveryKey(k.Reveal())
		if err != nil || !bytes.Equal(k.key, k2.key) {
			t.Fatalf("re-parse of %q: %v", k.Reveal(), err)
		}
	})
}

// FuzzUnwrapDataKey: a hostile recovery file never panics and never
// yields a key without the right recovery key.
func FuzzUnwrapDataKey(f *testing.F) {
	rk, _, file := newRecovery(f)
	f.Add(file)
	f.Add([]byte("{}"))
	f.Add([]byte(`{"type":"stratum.datakey.recovery","version":1}`))
	other, _ := NewRecoveryKey()
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := UnwrapDataKey(data, other); err == nil {
			t.Fatal("a file opened under an unrelated recovery key")
		}
		_, _ = UnwrapDataKey(data, rk)
	})
}
