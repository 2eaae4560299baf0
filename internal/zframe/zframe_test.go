package zframe_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"stratum/internal/zframe"
	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// record is node i's release record of variant v as a node sends it.
func record(t testing.TB, i, v int) []byte {
	t.Helper()
	p, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(i, v)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type input struct {
	name string
	p    []byte
	// shrinks: the frame must be smaller than the content, so a
	// compressed block was written and read.
	shrinks bool
}

func inputs(t testing.TB) []input {
	rng := rand.New(rand.NewPCG(7, 8))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	text := []byte(strings.Repeat("the release set of node n-00042 runs sha256:0123abcd ", 30000))
	var in []input
	for v := range 3 {
		in = append(in, input{fmt.Sprintf("record-variant-%d", v), record(t, 5, v), true})
	}
	for _, n := range []int{0, 1, 2, 3, 4, 5, 100, 128<<10 - 1, 128 << 10, 128<<10 + 1, 1 << 20} {
		in = append(in, input{fmt.Sprintf("random-%d", n), random(n), false})
		in = append(in, input{fmt.Sprintf("zero-%d", n), make([]byte, n), n >= 100})
		in = append(in, input{fmt.Sprintf("text-%d", n), text[:n], n >= 100})
	}
	// Hex digits with no repeats S2 finds: literals only, which Huffman
	// codes in about half (one stream, four, and every size header).
	hex := func(n int) []byte {
		p := random(n)
		for i := range p {
			p[i] = "0123456789abcdef"[p[i]&15]
		}
		return p
	}
	for _, n := range []int{100, 500, 1023, 1024, 5000, 16383, 16384, 40000, 128 << 10} {
		in = append(in, input{fmt.Sprintf("hex-%d", n), hex(n), true})
	}
	// Long matches: a block, then the same block again past 64 KiB back
	// (S2's copies of 4-byte offsets, split into pieces of up to 64).
	far := random(70 << 10)
	in = append(in, input{"far-repeat", append(far, far[:50<<10]...), true})
	// A raw block (S2 finds nothing in random bytes), then a block whose
	// first match, at offset 1, is the frame's first repeat offset: a raw
	// block changes none.
	once := random(128 << 10)
	second := append([]byte("ab"), make([]byte, 1000)...)
	in = append(in, input{"raw-then-repeats", append(append(once, second...), text[:50_000]...), true})
	// Literal runs of every length code and matches of every length code.
	var mixed []byte
	for _, n := range []int{1, 15, 16, 17, 63, 64, 65, 127, 128, 300, 1000, 5000, 20000, 70000} {
		mixed = append(mixed, random(n)...)
		mixed = append(mixed, text[:n+3]...)
	}
	in = append(in, input{"mixed", mixed, true})
	return in
}

// TestRoundTrip: klauspost's decoder reads every frame back to its
// content, and the frames of compressible content are smaller.
func TestRoundTrip(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, tc := range inputs(t) {
		f := zframe.Append([]byte("prefix"), tc.p)
		if !bytes.HasPrefix(f, []byte("prefix")) {
			t.Fatalf("%s: dst's bytes were not kept", tc.name)
		}
		f = f[len("prefix"):]
		got, err := dec.DecodeAll(f, nil)
		if err != nil || !bytes.Equal(got, tc.p) {
			t.Errorf("%s: %d bytes decode to %d (%v)", tc.name, len(tc.p), len(got), err)
		}
		if tc.shrinks && len(f) >= len(tc.p) {
			t.Errorf("%s: %d bytes make a frame of %d", tc.name, len(tc.p), len(f))
		}
		if len(f) > len(tc.p)+14+3*(len(tc.p)/(128<<10)+1) {
			t.Errorf("%s: %d bytes make a frame of %d, more than raw blocks", tc.name, len(tc.p), len(f))
		}
	}
}

// TestZstdCommand: the streaming decoder and the reference decoder (the
// zstd command) read all the frames concatenated, as a page of them is
// sent.
func TestZstdCommand(t *testing.T) {
	var stream, want []byte
	for _, tc := range inputs(t) {
		stream = zframe.Append(stream, tc.p)
		want = append(want, tc.p...)
	}
	streamDecodes(t, stream, want)
}

// TestRawFrames: raw frames of every header size (content sizes 0 to
// past one 128 KiB block), alone and concatenated with compressed
// frames, decode to their content, by klauspost's decoder and the zstd
// command; RawSize is their size.
func TestRawFrames(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var stream, want []byte
	for _, n := range []int{0, 1, 255, 256, 257, 65535, 65791, 65792, 128 << 10, 128<<10 + 1, 300 << 10} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		f := zframe.AppendRaw(nil, p)
		if len(f) != zframe.RawSize(n) {
			t.Fatalf("%d bytes: frame of %d, RawSize says %d", n, len(f), zframe.RawSize(n))
		}
		got, err := dec.DecodeAll(f, nil)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: decodes to %d (%v)", n, len(got), err)
		}
		stream = append(stream, f...)
		want = append(want, p...)
		stream = zframe.Append(stream, p)
		want = append(want, p...)
	}
	got, err := dec.DecodeAll(stream, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("concatenated frames decode to %d bytes (%v), want %d", len(got), err, len(want))
	}
	streamDecodes(t, stream, want)
}

// streamDecodes checks that concatenated frames decode to want as the
// CLI reads a page (klauspost's streaming decoder) and by the zstd
// command.
func streamDecodes(t *testing.T, stream, want []byte) {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("concatenated frames stream to %d bytes (%v), want %d", len(got), err, len(want))
	}
	zstdCmd, err := exec.LookPath("zstd")
	if err != nil {
		t.Skip("no zstd command on this machine (.ci/run installs it): the reference decoder is not tried")
	}
	cmd := exec.Command(zstdCmd, "-d", "-c", "-q")
	cmd.Stdin = bytes.NewReader(stream)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("zstd -d: %v (%s), %d bytes, want %d", err, stderr.String(), len(out), len(want))
	}
}

// zstdFastest is zstd's fastest encoder, as releaseset used it before
// this package, with its literals raw (raw) or Huffman coded.
func zstdFastest(t testing.TB, raw bool) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true), zstd.WithSingleSegment(true), zstd.WithNoEntropyCompression(raw))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestSize: a record's frame is at most 10% larger than zstd's fastest
// encoder's, and its Huffman-coded literals make it at most three
// quarters of that encoder's frame with raw literals.
func TestSize(t *testing.T) {
	coded, raw := zstdFastest(t, false), zstdFastest(t, true)
	for v := range 3 {
		p := record(t, 5, v)
		ours, theirs, rawLits := len(zframe.Append(nil, p)), len(coded.EncodeAll(p, nil)), len(raw.EncodeAll(p, nil))
		t.Logf("variant %d: %d bytes: frame of %d, zstd's %d (%d with raw literals)", v, len(p), ours, theirs, rawLits)
		if ours*100 > theirs*110 || ours*4 > rawLits*3 {
			t.Errorf("variant %d: %d bytes make a frame of %d, zstd's fastest makes %d (%d with raw literals)", v, len(p), ours, theirs, rawLits)
		}
	}
}

// TestNoAllocation: appending to a buffer large enough allocates nothing.
func TestNoAllocation(t *testing.T) {
	p := record(t, 5, 0)
	dst := make([]byte, 0, 2*len(p))
	zframe.Append(dst, p)
	if n := testing.AllocsPerRun(100, func() { zframe.Append(dst, p) }); n != 0 {
		t.Errorf("Append allocates %v times a call", n)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("a"))
	f.Add([]byte("abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc"))
	f.Add(bytes.Repeat([]byte{0}, 1000))
	f.Add(record(f, 1, 2))
	// Hex digits without repeats: literals a Huffman table codes.
	var digests []byte
	for i := range 5 {
		sum := sha256.Sum256([]byte{byte(i)})
		digests = hex.AppendEncode(digests, sum[:])
	}
	f.Add(digests)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		f.Fatal(err)
	}
	defer dec.Close()
	f.Fuzz(func(t *testing.T, p []byte) {
		// p, and p three times over with a byte between, so that S2
		// finds matches in short inputs too.
		for _, q := range [][]byte{p, append(append(append(append(slices.Clip(p), 'x'), p...), 'y'), p...)} {
			fr := zframe.Append(nil, q)
			got, err := dec.DecodeAll(fr, nil)
			if err != nil || !bytes.Equal(got, q) {
				t.Fatalf("%d bytes decode to %d (%v)", len(q), len(got), err)
			}
		}
	})
}

// BenchmarkAppend: a record's frame by this package and by zstd's
// fastest encoder, its literals Huffman coded and raw.
func BenchmarkAppend(b *testing.B) {
	p := record(b, 5, 0)
	dst := make([]byte, 0, 2*len(p))
	b.Run("zframe", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			dst = zframe.Append(dst[:0], p)
		}
		b.ReportMetric(float64(len(dst)), "frame-bytes")
	})
	for _, c := range []struct {
		name string
		raw  bool
	}{{"zstd-fastest", false}, {"zstd-fastest-raw-literals", true}} {
		b.Run(c.name, func(b *testing.B) {
			enc := zstdFastest(b, c.raw)
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				dst = enc.EncodeAll(p, dst[:0])
			}
			b.ReportMetric(float64(len(dst)), "frame-bytes")
		})
	}
}
