package releaseset

import (
	"bufio"
	"encoding/binary"
	"io"
	"sync"
)

// appendRawFrame appends p as one zstd frame of raw (stored) blocks
// (RFC 8878 section 3.1.1): the bytes around the kept records' frames in
// a page sent in zstd. A decoder reads concatenated frames as one stream.
func appendRawFrame(dst, p []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, 0xFD2FB528)
	// Frame header: single segment (the window is the content), no
	// checksum, no dictionary, the content size in 1, 2, 4 bytes.
	n := len(p)
	switch {
	case n < 256:
		dst = append(dst, 0x20, byte(n))
	case n < 65536+256:
		dst = append(dst, 0x60)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-256))
	default:
		dst = append(dst, 0xA0)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	}
	const maxBlock = 128 << 10
	for first := true; first || len(p) > 0; first = false {
		m := min(len(p), maxBlock)
		last := uint32(0)
		if m == len(p) {
			last = 1
		}
		h := last | uint32(m)<<3 // block type 0: raw
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, p[:m]...)
		p = p[m:]
	}
	return dst
}

// rawFrameSize is len(appendRawFrame(nil, p)) for len(p) == n.
func rawFrameSize(n int) int {
	size := 4 + 2
	switch {
	case n < 256:
	case n < 65536+256:
		size++
	default:
		size += 3
	}
	blocks := max(1, (n+(128<<10)-1)/(128<<10))
	return size + 3*blocks + n
}

// writeParts writes parts in writes of at least 256 KiB: thousands of
// small parts written one by one cost a TLS record and a system call
// each. The buffer is pooled: a page's answer allocates no megabytes.
func writeParts(w io.Writer, parts [][]byte) (int64, error) {
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil)
		writerPool.Put(bw)
	}()
	var n int64
	for _, p := range parts {
		m, err := bw.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}
