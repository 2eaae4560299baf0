package releaseset

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"stratum/wire"
	"sync"
	"time"
)

// Answer is one encoded release set: the exact bytes every GET of the same
// generation writes, its strong ETag, and forms derived from those bytes
// (compressed encodings) made once per generation.
//
// A 10,000-node set is over 100 MB of JSON; encoding it on every GET was
// most of the endpoint's cost. Each node's fragment is encoded once per
// record (and per stale flag) and kept; a new Answer only joins fragments
// and re-derives the summary, and a GET of an unchanged set writes bytes.
type Answer struct {
	// ETag is the strong validator of the identity bytes, quoted.
	ETag string

	parts [][]byte
	// stream, when parts is nil, writes the identity encoding (a set too
	// large to hold encoded).
	stream func(w io.Writer) error
	size   int
	// zstdParts, when set, are the answer in the zstd coding, made
	// without compressing (a page: its records' kept frames between raw
	// frames); zstdSize is their length.
	zstdParts [][]byte
	zstdSize  int

	mu      sync.Mutex
	derived map[string]*derivedForm
}

type derivedForm struct {
	once sync.Once
	b    []byte
	err  error
}

// Size is the length of the identity encoding.
func (a *Answer) Size() int { return a.size }

// WriteTo writes the identity encoding, in writes of at least 256 KiB:
// thousands of ~11 KB fragments written one by one cost a TLS record
// flush and a system call each.
func (a *Answer) WriteTo(w io.Writer) (int64, error) {
	if a.parts == nil && a.stream != nil {
		bw := writerPool.Get().(*bufio.Writer)
		bw.Reset(w)
		defer func() {
			bw.Reset(nil)
			writerPool.Put(bw)
		}()
		cw := &countingWriter{w: bw}
		if err := a.stream(cw); err != nil {
			return cw.n, err
		}
		return cw.n, bw.Flush()
	}
	return writeParts(w, a.parts)
}

// Encoded returns the answer in the content coding enc when it was made
// in that coding (a page in zstd), with its length: nothing to compress.
func (a *Answer) Encoded(enc string) (body io.WriterTo, size int, ok bool) {
	if enc != "zstd" || a.zstdParts == nil {
		return nil, 0, false
	}
	return partsWriter(a.zstdParts), a.zstdSize, true
}

type partsWriter [][]byte

func (p partsWriter) WriteTo(w io.Writer) (int64, error) { return writeParts(w, p) }

// Derived returns the form of the answer that derive makes from the
// identity bytes (a compressed encoding), making it once per Answer;
// concurrent callers of one form share one derivation.
func (a *Answer) Derived(form string, derive func(w io.Writer, identity io.WriterTo) error) ([]byte, error) {
	a.mu.Lock()
	if a.derived == nil {
		a.derived = map[string]*derivedForm{}
	}
	d := a.derived[form]
	if d == nil {
		d = &derivedForm{}
		a.derived[form] = d
	}
	a.mu.Unlock()
	d.once.Do(func() {
		var buf bytes.Buffer
		d.err = derive(&buf, a)
		d.b = buf.Bytes()
	})
	return d.b, d.err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// answerCache is the last view and what it was built from: the
// membership generation, the records' version and the time until which no
// recent record turns stale.
type answerCache struct {
	view       *view
	generation uint64
	version    uint64
	validUntil time.Time
}

func (c *answerCache) fresh(generation, version uint64, now time.Time) bool {
	return c.view != nil && c.generation == generation && c.version == version && !now.After(c.validUntil)
}

// instanceTag makes ETags of different founder processes differ: record
// versions restart at zero with the process.
var instanceTag = func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// fragment is one node's encoded entry of nodes[]; it depends on the
// record and on whether the record is stale.
type fragment struct {
	seq   uint64
	stale bool
	// running is the node's runningRelease as encoded: for a node that
	// recorded none it is the cluster's, which moves with other records.
	running string
	behind  bool
	// hostname is the member's, as encoded.
	hostname string
	b        []byte
	// rel is the kept record the entry was decoded from.
	rel []byte
}

// encodeNode encodes n exactly as WriteSet does (an Encoder without
// HTML escaping, so with its trailing newline).
func encodeNode(n wire.SetNode) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeHead encodes everything before the nodes, as WriteSet does.
func encodeHead(s wire.ReleaseSet) ([]byte, error) {
	raw, err := json.Marshal(headOf(s))
	if err != nil {
		return nil, err
	}
	// Reopen the head object to append "nodes".
	return append(raw[:len(raw)-1], `,"nodes":[`...), nil
}

func etagOf(generation, version, build uint64) string {
	return fmt.Sprintf(`"rs-%s-%d-%d-%d"`, instanceTag, generation, version, build)
}
