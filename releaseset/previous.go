package releaseset

import (
	"bytes"
	"unicode/utf8"

	"stratum/store"
)

// previousRunning is the runningRelease of node's stored record, found
// false when it has none. A re-record (the steady state: each node
// recording again what it runs) reads it to tell a change of release,
// which is audited, from a repeat; decoding it with json.Unmarshal
// scanned all 11 KB of the record, which was a third of the re-record's
// CPU (BenchmarkRecordPath/again). The record's first field is
// runningRelease (storedJSON and json.Marshal of a Stored both write it
// first), so it is read from there; a record not so written, or a value
// with an escape, is decoded the slow way.
func previousRunning(tx *store.Tx, node string) (string, bool, error) {
	raw, err := bucketRecords.GetRaw(tx, node)
	if err != nil || raw == nil {
		return "", false, err
	}
	if v, ok := leadingRunning(raw); ok {
		return v, true, nil
	}
	prev, found, err := store.GetPart[struct{ RunningRelease string }](tx, bucketRecords, node)
	return prev.RunningRelease, found, err
}

// leadingRunning is the value of raw's leading "RunningRelease" string
// when raw starts with it and the string holds no escape (its bytes
// between the quotes are then its value, valid UTF-8 aside).
func leadingRunning(raw []byte) (string, bool) {
	const key = `{"RunningRelease":"`
	if !bytes.HasPrefix(raw, []byte(key)) {
		return "", false
	}
	rest := raw[len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", false
	}
	v := rest[:end]
	if bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return "", false
	}
	for _, c := range v {
		if c < 0x20 { // not valid unescaped in JSON: let the decoder say so
			return "", false
		}
	}
	return string(v), true
}
