package releaseset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"
)

// cachedRecord is what the service keeps of one node's last record: its
// facts for the summary and its release's JSON, compressed, for nodes[].
// At 100,000 nodes the decoded records did not fit in a gigabyte; the
// facts share their strings and the JSON, compressed against a dictionary
// (the first record the service kept: records differ little), takes a few
// hundred bytes a node. It carries the commit sequence of its record, so
// commit hooks that run out of order never put an older record over a
// newer one.
type cachedRecord struct {
	seq        uint64
	running    string
	recordedAt time.Time
	facts      *facts
	// release is the release object's JSON as nodes[] writes it
	// (encodeNode), compressed by the service's codec; plain is its length.
	release []byte
	plain   int
}

// recordCodec compresses records' JSON against one dictionary, fixed for
// the life of the service.
type recordCodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

func newRecordCodec(dict []byte) (*recordCodec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDictRaw(1, dict), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(1, dict), zstd.WithDecoderConcurrency(0))
	if err != nil {
		return nil, err
	}
	return &recordCodec{enc: enc, dec: dec}, nil
}

// codecFor returns the service's codec, made from sample when there is
// none yet.
func (s *Service) codecFor(sample []byte) (*recordCodec, error) {
	s.codecOnce.Do(func() {
		s.codec, s.codecErr = newRecordCodec(bytes.Clone(sample))
	})
	return s.codec, s.codecErr
}

// encodeRelease is rec's JSON exactly as encodeNode writes it inside a
// node (no HTML escaping), without a trailing newline.
func encodeRelease(rec *Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// cache makes node's cachedRecord of st.
func (s *Service) cache(node string, st Stored, seq uint64) (cachedRecord, error) {
	plain, err := encodeRelease(&st.Release)
	if err != nil {
		return cachedRecord{}, err
	}
	codec, err := s.codecFor(plain)
	if err != nil {
		return cachedRecord{}, err
	}
	return cachedRecord{
		seq:        seq,
		running:    s.intern.string(st.RunningRelease),
		recordedAt: st.Release.RecordedAt,
		facts:      factsOf(node, &st.Release, &s.intern),
		release:    codec.enc.EncodeAll(plain, make([]byte, 0, len(plain)/8)),
		plain:      len(plain),
	}, nil
}

// appendRelease appends c's release JSON to dst.
func (s *Service) appendRelease(dst []byte, c cachedRecord) ([]byte, error) {
	if s.codec == nil {
		return nil, fmt.Errorf("release set: no record codec")
	}
	n := len(dst)
	out, err := s.codec.dec.DecodeAll(c.release, dst)
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
