package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"stratum/releaseset"
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

// compressTo writes src's bytes to w in the content coding enc.
func compressTo(enc string, w io.Writer, src io.WriterTo) error {
	var zw io.WriteCloser
	if enc == "zstd" {
		z, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			return err
		}
		zw = z
	} else {
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
	}
	if _, err := src.WriteTo(zw); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

// encodedLast keeps the compressed forms of the last identity body it
// was given, a domain answer shared by many requests (the nodes' members
// list): each form is made once per answer. The body is told by the
// address of its bytes, which stays its own while encodedLast holds it.
type encodedLast struct {
	mu    sync.Mutex
	src   *byte
	forms map[string][]byte
}

// form is src in the content coding enc.
func (c *encodedLast) form(src []byte, enc string) ([]byte, error) {
	if len(src) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src != &src[0] {
		c.src, c.forms = &src[0], map[string][]byte{}
	}
	if b, ok := c.forms[enc]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	if err := compressTo(enc, &buf, bytes.NewReader(src)); err != nil {
		return nil, err
	}
	c.forms[enc] = buf.Bytes()
	return buf.Bytes(), nil
}

// writeShared answers body, shared by many requests, as JSON: in the
// coding the client accepts (made once per body by forms), else as it
// is, with an exact Content-Length.
func writeShared(w http.ResponseWriter, r *http.Request, body []byte, forms *encodedLast) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Add("Vary", "Accept-Encoding")
	if enc := acceptedEncoding(r); enc != "" && len(body) > 0 {
		encoded, err := forms.form(body, enc)
		if err != nil {
			return err
		}
		h.Set("Content-Encoding", enc)
		body = encoded
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // as writeJSON: a client gone is not an error to answer
	return nil
}

// writeAnswer answers a cached release set: 304 when the client holds
// this generation's bytes, else the identity bytes or their compressed
// form (made once per generation), with an exact Content-Length. Each
// coding has its own strong ETag, as representations of one resource.
func writeAnswer(w http.ResponseWriter, r *http.Request, ans *releaseset.Answer) error {
	enc := acceptedEncoding(r)
	etag := ans.ETag
	if enc != "" {
		etag = strings.TrimSuffix(etag, `"`) + "-" + enc + `"`
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Add("Vary", "Accept-Encoding")
	h.Set("ETag", etag)
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if enc == "" {
		h.Set("Content-Length", strconv.Itoa(ans.Size()))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return nil
		}
		_, err := ans.WriteTo(w)
		return err
	}
	// A page made in zstd is sent as made; other codings are compressed
	// once per answer.
	if body, size, ok := ans.Encoded(enc); ok {
		h.Set("Content-Encoding", enc)
		h.Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return nil
		}
		_, err := body.WriteTo(w)
		return err
	}
	body, err := ans.Derived(enc, func(dst io.Writer, src io.WriterTo) error { return compressTo(enc, dst, src) })
	if err != nil {
		return err
	}
	h.Set("Content-Encoding", enc)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	_, err = w.Write(body)
	return err
}

// etagMatches is If-None-Match's weak comparison (RFC 9110 13.1.2): "*",
// or any listed tag equal to etag once W/ is set aside.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
