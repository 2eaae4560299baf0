package releaseset

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"stratum/store"
)

// A record is stored compact: compactRecord, the running release (its
// length as a uvarint, then its bytes), then the release's JSON as the one
// zstd frame the cache keeps of it (keep). At 11 KB the JSON took three
// pages of the store and its frame takes two: a commit of a storm of
// records writes 40% fewer pages (480,000 to 285,000 for 100,000 first
// records), and the file is half the size. The running release leads, so a
// repeat record tells a change of release from its first bytes.
//
// A record written before this format is the JSON of a Stored; it is read
// as such until its node records again.
const compactRecord byte = 0x01

// storedLimit bounds what a frame may decode to (recordDecoder): a record
// is read from a request body of at most 4 MiB (httpapi's
// RecordBodyLimit), and the records bucket is not authenticated (it holds
// what nodes say of themselves), so a stored frame may have been written
// by anyone who could write the file.
const storedLimit = 4 << 20

// appendStored appends the compact record of running and frame to dst.
func appendStored(dst []byte, running string, frame []byte) []byte {
	dst = append(dst, compactRecord)
	dst = binary.AppendUvarint(dst, uint64(len(running)))
	dst = append(dst, running...)
	return append(dst, frame...)
}

// splitStored is the running release and the frame of a compact record;
// ok is false when raw is not one.
func splitStored(raw []byte) (running string, frame []byte, ok bool) {
	if len(raw) == 0 || raw[0] != compactRecord {
		return "", nil, false
	}
	n, size := binary.Uvarint(raw[1:])
	if size <= 0 || n > uint64(len(raw)-1-size) {
		return "", nil, false
	}
	start := 1 + size
	return string(raw[start : start+int(n)]), raw[start+int(n):], true
}

var errStored = errors.New("not a stored release record")

// DecodeStored reads a stored release record, compact or written before as
// JSON. The crash harness reads the store's file with it.
func DecodeStored(raw []byte) (Stored, error) {
	var st Stored
	if len(raw) > 0 && raw[0] == '{' {
		err := json.Unmarshal(raw, &st)
		return st, err
	}
	running, frame, ok := splitStored(raw)
	if !ok {
		return st, errStored
	}
	plain, err := recordDecoder.DecodeAll(frame, nil)
	if err != nil {
		return st, fmt.Errorf("%w: %v", errStored, err)
	}
	st.RunningRelease = running
	err = json.Unmarshal(plain, &st.Release)
	return st, err
}

// previousRunning is the runningRelease of node's stored record, found
// false when it has none. A repeat record (the steady state: each node
// recording again what it runs) reads it to tell a change of release,
// which is audited, from a repeat; a compact record's leads.
func previousRunning(tx *store.Tx, node string) (string, bool, error) {
	raw := bucketRecords.Get(tx, node)
	if raw == nil {
		return "", false, nil
	}
	if running, _, ok := splitStored(raw); ok {
		return running, true, nil
	}
	// An older JSON record; one that cannot be read counts as none (the
	// new record replaces it, audited as a change).
	st, err := DecodeStored(raw)
	return st.RunningRelease, err == nil, nil
}
