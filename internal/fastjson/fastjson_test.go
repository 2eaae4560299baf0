package fastjson_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"stratum/internal/fastjson"
	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// encodingJSON is what fastjson must write: encoding/json without HTML
// escaping and without the Encoder's newline.
func encodingJSON(t testing.TB, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

func same(t *testing.T, v any) {
	t.Helper()
	want, werr := encodingJSON(t, v)
	got, ok, err := fastjson.Append([]byte("prefix"), v)
	if !ok {
		t.Fatalf("%T has no plan", v)
	}
	if (err != nil) != (werr != nil) {
		t.Fatalf("%T: error %v, encoding/json's %v", v, err, werr)
	}
	if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%T:\n got %s\nwant %s", v, got, want)
	}
	want, werr = json.Marshal(v)
	got, _, err = fastjson.AppendHTML(nil, v)
	if (err != nil) != (werr != nil) || err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%T with HTML escaping:\n got %s %v\nwant %s %v", v, got, err, want, werr)
	}
}

// kinds has a field of every kind with a plan.
type kinds struct {
	S    string          `json:"s"`
	SO   string          `json:"so,omitempty"`
	Src  wire.HostSource `json:"src,omitempty"`
	B    bool            `json:"b"`
	BO   bool            `json:"bo,omitempty"`
	I    int             `json:"i"`
	I8   int8            `json:"i8,omitempty"`
	U    uint64          `json:"u"`
	T    time.Time       `json:"t"`
	TO   time.Time       `json:"to,omitempty"`
	PT   *time.Time      `json:"pt,omitempty"`
	PB   *bool           `json:"pb"`
	PI   *int            `json:"pi,omitempty"`
	PK   *kinds          `json:"pk,omitempty"`
	L    []kinds         `json:"l"`
	LO   []string        `json:"lo,omitempty"`
	LP   []*int          `json:"lp"`
	NoTg string
	Skip string `json:"-"`
	un   int
}

// TestMatchesEncodingJSON: records and values of every kind, strings
// that need escaping among them, encode to encoding/json's bytes.
func TestMatchesEncodingJSON(t *testing.T) {
	for i := range 12 {
		r := releasesettest.Record(i, i)
		same(t, &r)
		same(t, wire.RecordRequest{RunningRelease: "0.2.0", Release: r})
	}
	same(t, &wire.Record{})
	now := time.Date(2026, 7, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	one, tr := 1, true
	for _, s := range []string{"", "plain", "<a&b>", "é ü", "tab\there", "quote\"back\\", "\u2028\u2029", "\x00\x1f\x7f", "bad\xffutf8", "\xed\xa0\x80"} {
		same(t, kinds{S: s, SO: s, Src: wire.HostSource(s), NoTg: s, T: now, PB: &tr, PI: &one, LO: []string{s, ""},
			L: []kinds{{}, {S: s, PK: &kinds{S: s}}}, LP: []*int{nil, &one}, PT: &now})
	}
	same(t, kinds{L: []kinds{}, LP: []*int{}, LO: []string{}, un: 1}) // un: not encoded
	if _, ok, _ := fastjson.Append(nil, map[string]int{}); ok {
		t.Error("a map has a plan")
	}
	if _, ok, _ := fastjson.Append(nil, struct{ F float64 }{}); ok {
		t.Error("a float has a plan")
	}
	// A year encoding/json cannot write is an error, not bytes.
	same(t, kinds{T: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
}

// FuzzMatchesEncodingJSON: any record json.Unmarshal makes of the bytes
// encodes to encoding/json's bytes.
func FuzzMatchesEncodingJSON(f *testing.F) {
	for i := range 3 {
		b, err := json.Marshal(releasesettest.Record(i, i))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"os":{"prettyName":"\u2028<&>\ud800"},"extensions":[],"pins":[{"name":"\u0000","containers":-3}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r wire.Record
		if json.Unmarshal(b, &r) != nil {
			return
		}
		same(t, &r)
	})
}

// BenchmarkRecord: an 11 KB release record, by fastjson and by
// encoding/json (json.Marshal, as the store writes it).
func BenchmarkRecord(b *testing.B) {
	r := releasesettest.Record(1, 2)
	b.Run("fastjson", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := fastjson.AppendHTML(nil, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
