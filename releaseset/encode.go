package releaseset

import (
	"bufio"
	"encoding/json"
	"io"
)

// WriteJSON writes s as JSON, one node at a time: the set of a large
// cluster is ~11 KB per node, and encoding it whole held the entire answer
// (over 100 MB at 10,000 nodes) in one growing buffer.
func (s Set) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	head := struct {
		Node           string       `json:"node"`
		ControlPlane   ControlPlane `json:"controlPlane"`
		RunningRelease string       `json:"runningRelease"`
		Summary        Summary      `json:"summary"`
	}{s.Node, s.ControlPlane, s.RunningRelease, s.Summary}
	raw, err := json.Marshal(head)
	if err != nil {
		return err
	}
	// Reopen the head object to append "nodes".
	bw.Write(raw[:len(raw)-1])
	bw.WriteString(`,"nodes":[`)
	for i, n := range s.Nodes {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(n); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
