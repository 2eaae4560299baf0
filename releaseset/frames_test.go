package releaseset

import (
	"bytes"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"

	"stratum/internal/zframe"
)

// TestRawFrames: raw frames of every header size (content sizes 0 to
// past one 128 KiB block) and concatenated with compressed frames decode
// to their content, by the CLI's decoder and by the zstd command when it
// is installed.
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
		f := appendRawFrame(nil, p)
		if len(f) != rawFrameSize(n) {
			t.Fatalf("%d bytes: frame of %d, rawFrameSize says %d", n, len(f), rawFrameSize(n))
		}
		got, err := dec.DecodeAll(f, nil)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: decodes to %d (%v)", n, len(got), err)
		}
		stream = append(stream, f...)
		want = append(want, p...)
		c := zframe.Append(nil, p)
		stream = append(stream, c...)
		want = append(want, p...)
	}
	got, err := dec.DecodeAll(stream, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("concatenated frames decode to %d bytes (%v), want %d", len(got), err, len(want))
	}
	zstdCmd, err := exec.LookPath("zstd")
	if err != nil {
		t.Log("no zstd command: the reference decoder is not tried")
		return
	}
	cmd := exec.Command(zstdCmd, "-d", "-c")
	cmd.Stdin = bytes.NewReader(stream)
	out, err := cmd.Output()
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("zstd -d: %v, %d bytes, want %d", err, len(out), len(want))
	}
}
