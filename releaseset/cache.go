package releaseset

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"stratum/internal/zframe"
	"stratum/wire"
)

// cachedRecord is what the service keeps of one node's last record: its
// facts for the summary and its release's JSON, compressed, for nodes[].
// At 100,000 nodes the decoded records did not fit in a gigabyte; the
// facts share their strings and the JSON is one zstd frame of its own
// (no dictionary), so a page of nodes[] asked for in zstd is these frames
// sent as they are, between small uncompressed frames of what the page
// says around them (zstd frames concatenate): a page costs no
// compression and no decompression. It carries the commit sequence of
// its record, so commit hooks that run out of order never put an older
// record over a newer one.
type cachedRecord struct {
	seq        uint64
	running    string
	recordedAt time.Time
	facts      *facts
	// release is the release object's JSON as nodes[] writes it
	// (encodeNode), one zstd frame; plain is its length.
	release []byte
	plain   int
	// tag identifies release's bytes in a page's ETag.
	tag [16]byte
}

// recordDecoder reads the kept records' frames back. Each frame is
// written by zframe.Append: one zstd frame of its own (no dictionary),
// single segment, its matches found by S2's block encoder and its
// literals (the hex digests, mostly) Huffman coded. An 11 KB record's
// frame is 3.6-3.9 KB (5.3-5.6 with raw literals):
// about 380 MiB at 100,000 nodes, and one bbolt page a stored record
// instead of two; it takes about 20 us to make (13 with raw literals, 26
// by zstd's fastest encoder: BenchmarkAppend). Its repeats are still
// found, and they are most of a record's size. Decoders keep no state
// between DecodeAll calls. It also reads the stored records' frames
// (DecodeStored), so what it may decode to is bounded (storedLimit).
var recordDecoder = func() *zstd.Decoder {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(storedLimit), zstd.WithDecoderMaxWindow(storedLimit))
	if err != nil {
		panic(err)
	}
	return dec
}()

// encodeRelease appends rec's JSON to dst exactly as encodeNode writes
// it inside a node (no HTML escaping), without a trailing newline.
func encodeRelease(dst []byte, rec *wire.Record) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// scratch holds a record's JSON and frame while it is kept: only the
// frame, copied to its size, stays.
type scratch struct{ plain, frame []byte }

var scratchPool = sync.Pool{New: func() any { return &scratch{plain: make([]byte, 0, 16<<10), frame: make([]byte, 0, 16<<10)} }}

// cache makes node's cachedRecord of st.
func (s *Service) cache(node string, st Stored, seq uint64) (cachedRecord, error) {
	c, _, err := s.keep(node, st, seq, nil, nil)
	return c, err
}

// keep makes node's cachedRecord of st and, given a buffer to append it
// to (non-nil), st's stored record (appendStored) with the same frame,
// its release's JSON taken from tail when it is not nil (Request).
func (s *Service) keep(node string, st Stored, seq uint64, stored, tail []byte) (cachedRecord, []byte, error) {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	plain, err := appendPlain(sc.plain[:0], &st.Release, tail)
	if err != nil {
		return cachedRecord{}, nil, err
	}
	sc.plain = plain
	sc.frame = zframe.Append(sc.frame[:0], plain)
	var raw []byte
	if stored != nil {
		raw = appendStored(stored, st.RunningRelease, sc.frame)
	}
	c := cachedRecord{
		seq:        seq,
		running:    s.intern.string(st.RunningRelease),
		recordedAt: st.Release.RecordedAt,
		facts:      factsOf(node, &st.Release, &s.intern),
		release:    bytes.Clone(sc.frame),
		plain:      len(plain),
	}
	sum := sha256.Sum256(c.release)
	copy(c.tag[:], sum[:])
	return c, raw, nil
}

// storedPool holds the buffers of stored records: the store holds one
// until its commit, after which Record is done with it.
var storedPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledStored: a larger buffer is left to the collector.
const maxPooledStored = 64 << 10

// appendRelease appends c's release JSON to dst.
func (s *Service) appendRelease(dst []byte, c cachedRecord) ([]byte, error) {
	n := len(dst)
	out, err := recordDecoder.DecodeAll(c.release, dst)
	if err == nil && len(out)-n != c.plain {
		err = fmt.Errorf("release set: a kept record decodes to %d bytes, want %d", len(out)-n, c.plain)
	}
	return out, err
}

// stored decodes c back into the record it was made from.
func (s *Service) stored(c cachedRecord) (Stored, error) {
	raw, err := s.appendRelease(nil, c)
	if err != nil {
		return Stored{}, err
	}
	st := Stored{RunningRelease: c.running}
	err = json.Unmarshal(raw, &st.Release)
	return st, err
}
