package releaseset_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// TestWriteJSONMatchesMarshal: the streamed form decodes to what
// encoding/json produces for the same set.
func TestWriteJSONMatchesMarshal(t *testing.T) {
	now := releasesettest.RecordedAt.Add(time.Minute)
	in := releaseset.Input{Now: now, Node: "n-00000000", Records: map[string]releaseset.Stored{}}
	for i := 0; i < 5; i++ {
		id := "n-0000000" + string(rune('0'+i))
		in.Members = append(in.Members, id)
		if i != 3 {
			in.Records[id] = releaseset.Stored{RunningRelease: "0.2.0", Release: releasesettest.Record(i, i)}
		}
	}
	for _, set := range []wire.ReleaseSet{releaseset.Describe(in), releaseset.Describe(releaseset.Input{Now: now})} {
		var streamed bytes.Buffer
		if err := releaseset.WriteSet(&streamed, set); err != nil {
			t.Fatal(err)
		}
		whole, _ := json.Marshal(set)
		var a, b any
		if err := json.Unmarshal(streamed.Bytes(), &a); err != nil {
			t.Fatalf("streamed JSON does not decode: %v\n%s", err, streamed.Bytes())
		}
		json.Unmarshal(whole, &b)
		ra, _ := json.Marshal(a)
		rb, _ := json.Marshal(b)
		if !bytes.Equal(ra, rb) {
			t.Fatalf("streamed JSON differs from json.Marshal:\n%s\n%s", ra, rb)
		}
	}
}
