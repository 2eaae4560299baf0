package releaseset

import (
	"bufio"
	"io"
	"sync"
)

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
