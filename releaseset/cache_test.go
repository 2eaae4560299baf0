package releaseset

import (
	"bytes"
	"encoding/json"
	"testing"

	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// TestStoredJSONIsMarshal: the stored JSON Record makes from the cache's
// encoding of a record is json.Marshal's, byte for byte, whether or not
// the record holds characters json.Marshal escapes for HTML.
func TestStoredJSONIsMarshal(t *testing.T) {
	seed, err := DecodeRecordRequest(seedRecordBody(t))
	if err != nil {
		t.Fatal(err)
	}
	html := releasesettest.Record(4, 2)
	html.OS.PrettyName = `Stratum <OS> & "friends" é \u2028`
	cases := []struct {
		name string
		st   Stored
	}{
		{"seed", Stored(seed)},
		{"synthetic 0", Stored{RunningRelease: "0.2.0", Release: releasesettest.Record(0, 0)}},
		{"synthetic older", Stored{RunningRelease: "0.1.0", Release: releasesettest.Record(1, 1)}},
		{"synthetic drift", Stored{RunningRelease: "0.2.0", Release: releasesettest.Record(2, 2)}},
		{"html in the record", Stored{RunningRelease: "0.2.0", Release: html}},
		{"html in the running release", Stored{RunningRelease: "0.2.0<&>\"", Release: releasesettest.Record(3, 0)}},
		{"empty", Stored{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkStoredJSON(t, c.st)
		})
	}
}

func checkStoredJSON(t *testing.T, st Stored) {
	t.Helper()
	want, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var s Service
	c, raw, err := s.keep("n-1", st, 0, []byte{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want) {
		t.Fatalf("stored JSON differs from json.Marshal:\n got %.300s\nwant %.300s", raw, want)
	}
	if c.plain == 0 || len(c.release) == 0 {
		t.Fatalf("nothing kept: %+v", c)
	}
}

// FuzzStoredJSON: whatever strings a record carries, the stored JSON is
// json.Marshal's.
func FuzzStoredJSON(f *testing.F) {
	f.Add("0.2.0", "Stratum OS 0.2.0", "host-1")
	f.Add("0.2.0<", "a & b", "\u2028")
	f.Add("\"", "\xff", "<script>")
	f.Fuzz(func(t *testing.T, running, pretty, hostname string) {
		rec := releasesettest.Record(5, 0)
		rec.OS.PrettyName = pretty
		rec.Pins = append(rec.Pins, wire.Pin{Name: hostname, Running: pretty + hostname})
		checkStoredJSON(t, Stored{RunningRelease: running, Release: rec})
	})
}
