package httpapi

import (
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// acceptedEncoding picks zstd, then gzip, from Accept-Encoding; q=0 refuses.
func acceptedEncoding(r *http.Request) string {
	accepts := map[string]bool{}
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		accepts[strings.ToLower(strings.TrimSpace(name))] = q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	switch {
	case accepts["zstd"]:
		return "zstd"
	case accepts["gzip"]:
		return "gzip"
	}
	return ""
}

// writeCompressed answers 200 with the JSON that write produces,
// compressed when the client accepts it: release sets of large clusters
// are megabytes of repetitive JSON.
func writeCompressed(w http.ResponseWriter, r *http.Request, write func(io.Writer) error) error {
	enc := acceptedEncoding(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	if enc == "" {
		return write(w)
	}
	w.Header().Set("Content-Encoding", enc)
	var zw io.WriteCloser
	if enc == "zstd" {
		z, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return err
		}
		zw = z
	} else {
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
	}
	if err := write(zw); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}
