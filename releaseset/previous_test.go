package releaseset

import (
	"encoding/json"
	"testing"
	"time"

	"stratum/internal/zframe"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// TestPreviousRunning: the release a node ran before is read from a
// compact record's lead, from a JSON record an earlier build wrote, and an
// unreadable record (the bucket is not authenticated) counts as none.
func TestPreviousRunning(t *testing.T) {
	db, _ := storetest.Temp(t)
	st := Stored{RunningRelease: "0.3.0", Release: wire.Record{RecordedAt: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}}
	for _, tc := range []struct {
		name      string
		raw       []byte
		want      string
		wantFound bool
	}{
		{"compact", appendStored(nil, st.RunningRelease, mustFrame(t, st)), "0.3.0", true},
		{"compact, empty release", appendStored(nil, "", mustFrame(t, st)), "", true},
		{"JSON of an earlier build", mustMarshal(t, st), "0.3.0", true},
		{"not a record", []byte("\x02garbage"), "", false},
		{"a length past the end", []byte{compactRecord, 0x7f, 'a'}, "", false},
		{"JSON cut short", []byte(`{"RunningRelease":"0.3`), "", false},
		{"none", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.Update(func(tx *store.Tx) error {
				if tc.raw == nil {
					return bucketRecords.Delete(tx, "n-1")
				}
				return bucketRecords.Put(tx, "n-1", tc.raw)
			}); err != nil {
				t.Fatal(err)
			}
			var got string
			var found bool
			if err := db.View(func(tx *store.Tx) error {
				var err error
				got, found, err = previousRunning(tx, "n-1")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if got != tc.want || found != tc.wantFound {
				t.Fatalf("previousRunning = %q, %v; want %q, %v", got, found, tc.want, tc.wantFound)
			}
		})
	}
}

// mustFrame is st's release as the cache keeps it: one zstd frame.
func mustFrame(t *testing.T, st Stored) []byte {
	t.Helper()
	plain, err := encodeRelease(nil, &st.Release)
	if err != nil {
		t.Fatal(err)
	}
	return zframe.Append(nil, plain)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
