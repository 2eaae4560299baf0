package httpapi

import (
	"io"
	"mime"
	"net/http"

	"stratum/apierr"
	"stratum/strictjson"
)

// Body limits (SPEC section 2).
const (
	DefaultBodyLimit = 1 << 20
	RecordBodyLimit  = 4 << 20
)

// readBody reads at most limit bytes; more is PAYLOAD_TOO_LARGE.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	return readBodyInto(r, limit, nil)
}

// readBodyInto is readBody reading into buf when it has room (a buffer
// of the caller's, reused once what was read is decoded: decoding
// copies every string).
func readBodyInto(r *http.Request, limit int64, buf []byte) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, apierr.New(apierr.PayloadTooLarge, "the request body is over its limit of %d bytes", limit)
	}
	if n := r.ContentLength; n >= 0 {
		// The length is known (net/http ends the body there): read it
		// into one buffer of its size, not a slice grown and copied
		// five times for an 11 KB record.
		b := buf[:0]
		if int64(cap(b)) >= n {
			b = b[:n]
		} else {
			b = make([]byte, n)
		}
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, apierr.New(apierr.InvalidInput, "the request body could not be read")
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, apierr.New(apierr.InvalidInput, "the request body could not be read")
	}
	if int64(len(b)) > limit {
		return nil, apierr.New(apierr.PayloadTooLarge, "the request body is over its limit of %d bytes", limit)
	}
	return b, nil
}

// decodeJSON reads a JSON body into v with the one strict decoder: an
// unknown, duplicate or mis-cased key, a wrong type or trailing data is
// INVALID_INPUT naming the field's path.
func decodeJSON(r *http.Request, v any) error {
	b, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	return strictjson.Decode(b, v)
}

// requireJSON refuses a body that does not say it is JSON: a web page can
// send text/plain (or no type) across sites without asking first, never
// application/json (SPEC 16.5).
func requireJSON(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return apierr.New(apierr.UnsupportedMediaType, "this endpoint takes Content-Type: application/json only")
	}
	return nil
}
