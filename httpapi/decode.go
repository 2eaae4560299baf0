package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"stratum/apierr"
)

// Body limits (SPEC section 2).
const (
	DefaultBodyLimit = 1 << 20
	RecordBodyLimit  = 4 << 20
)

// readBody reads at most limit bytes; more is PAYLOAD_TOO_LARGE.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, apierr.New(apierr.PayloadTooLarge, "the request body is over its limit of %d bytes", limit)
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

// decodeJSON reads a JSON body strictly into v: an unknown field, a wrong
// type or trailing data is INVALID_INPUT naming the field.
func decodeJSON(r *http.Request, v any) error {
	b, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	return DecodeStrict(b, v)
}

// DecodeStrict decodes b into v, refusing unknown fields.
func DecodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return apierr.WithFields(apierr.InvalidInput, "the request body is empty; a JSON object is expected", []apierr.FieldError{{Field: "", Message: "required"}})
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return apierr.WithFields(apierr.InvalidInput, "the request body has data after the JSON value", []apierr.FieldError{{Field: "", Message: "trailing data"}})
	}
	return nil
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		return apierr.WithFields(apierr.InvalidInput, "a field has the wrong type", []apierr.FieldError{{Field: field, Message: fmt.Sprintf("must be %s", jsonKind(typeErr.Type.Kind().String()))}})
	case errors.As(err, &syntaxErr):
		return apierr.WithFields(apierr.InvalidInput, "the request body is not valid JSON", []apierr.FieldError{{Field: "", Message: fmt.Sprintf("syntax error at byte %d", syntaxErr.Offset)}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return apierr.WithFields(apierr.InvalidInput, "the request has an unknown field", []apierr.FieldError{{Field: name, Message: "unknown field"}})
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return apierr.WithFields(apierr.InvalidInput, "the request body is truncated JSON", []apierr.FieldError{{Field: "", Message: "unexpected end of JSON"}})
	}
	return apierr.WithFields(apierr.InvalidInput, "the request body is not valid JSON", []apierr.FieldError{{Field: "", Message: "malformed JSON"}})
}

func jsonKind(k string) string {
	switch k {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	}
	return "a number"
}
