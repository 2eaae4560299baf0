package releaseset

import (
	"bufio"
	"io"
	"stratum/wire"
)

// WriteSet writes s as JSON, one node at a time: the set of a large
// cluster is ~11 KB per node, and encoding it whole held the entire answer
// (over 100 MB at 10,000 nodes) in one growing buffer. Service.Answer
// writes the same bytes from its cached fragments.
func WriteSet(w io.Writer, s wire.ReleaseSet) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	head, err := encodeHead(s)
	if err != nil {
		return err
	}
	bw.Write(head)
	for i, n := range s.Nodes {
		if i > 0 {
			bw.WriteByte(',')
		}
		frag, err := encodeNode(n)
		if err != nil {
			return err
		}
		bw.Write(frag)
	}
	bw.WriteString(setTail)
	return bw.Flush()
}

// setTail closes nodes[] and the answer.
const setTail = "]}\n"
