package releaseset

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestWriteTable(t *testing.T) {
	for _, tc := range describeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteTable(&buf, Describe(tc.in), len(tc.in.Members)); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			// The rows marked "*" are exactly the skewed fields.
			var marked []string
			for _, line := range strings.Split(out, "\n") {
				if rest, ok := strings.CutPrefix(line, "*"); ok {
					marked = append(marked, strings.Fields(rest)[0])
				}
			}
			if !slices.Equal(marked, tc.skew) {
				t.Errorf("marked rows %q, want %q\n%s", marked, tc.skew, out)
			}
			for _, d := range tc.drift {
				id := strings.Fields(d)[0]
				if !strings.Contains(out, "  "+id+"  ") {
					t.Errorf("drift of %s not listed\n%s", id, out)
				}
			}
			wantSummary := ": not consistent ("
			if tc.consistent {
				wantSummary = ": consistent\n"
			}
			if !strings.Contains(out, wantSummary) {
				t.Errorf("summary line lacks %q\n%s", wantSummary, out)
			}
			checkGolden(t, tc.name+".golden.txt", buf.Bytes())
		})
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestWriteTableReportsWriteErrors(t *testing.T) {
	s := Describe(cluster(baseRecord(), nil, baseRecord()))
	for n := range 3 {
		if err := WriteTable(&failingWriter{n: n}, s, len(s.Nodes)); err == nil || err.Error() != "disk full" {
			t.Errorf("after %d writes: err = %v, want disk full", n, err)
		}
	}
}
