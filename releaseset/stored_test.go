package releaseset

import (
	"testing"

	"stratum/internal/zframe"
	"stratum/releaseset/releasesettest"
)

// FuzzDecodeStored: the records bucket is not authenticated, so whatever
// bytes it holds are read without a panic or an allocation past the
// limit, and a compact record that reads back leads with the running
// release it holds.
func FuzzDecodeStored(f *testing.F) {
	st := Stored{RunningRelease: "0.2.0", Release: releasesettest.Record(3, 0)}
	plain, err := encodeRelease(nil, &st.Release)
	if err != nil {
		f.Fatal(err)
	}
	compact := appendStored(nil, st.RunningRelease, zframe.Append(nil, plain))
	f.Add(compact)
	f.Add(compact[:len(compact)/2])
	f.Add([]byte(`{"RunningRelease":"0.1.0","Release":{"recordedAt":"2026-07-01T12:00:00Z"}}`))
	f.Add([]byte{compactRecord, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{compactRecord, 0, 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58})
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := DecodeStored(raw)
		if err != nil {
			return
		}
		if running, _, ok := splitStored(raw); ok && running != got.RunningRelease {
			t.Fatalf("lead %q, decoded %q", running, got.RunningRelease)
		}
	})
}
