package releaseset

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestWriteJSONMatchesMarshal: the streamed form decodes to what
// encoding/json produces for the same set.
func TestWriteJSONMatchesMarshal(t *testing.T) {
	now := SyntheticRecordedAt.Add(time.Minute)
	in := Input{Now: now, Node: "n-00000000", Records: map[string]Stored{}}
	for i := 0; i < 5; i++ {
		id := "n-0000000" + string(rune('0'+i))
		in.Members = append(in.Members, id)
		if i != 3 {
			in.Records[id] = Stored{RunningRelease: "0.2.0", Release: SyntheticRecord(i, i)}
		}
	}
	for _, set := range []Set{Describe(in), Describe(Input{Now: now})} {
		var streamed bytes.Buffer
		if err := set.WriteJSON(&streamed); err != nil {
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
