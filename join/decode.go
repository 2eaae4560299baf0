package join

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"stratum/apierr"
)

// decodeObject parses body as one JSON object and records every key not in
// known, so a client learns all its unknown fields in one round trip
// (json.Decoder.DisallowUnknownFields stops at the first). An empty body
// is the empty object: POST .../approve with no body takes every default.
func decodeObject(f *apierr.Fields, prefix string, body []byte, known ...string) (map[string]json.RawMessage, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 && prefix == "" {
		return map[string]json.RawMessage{}, true
	}
	if !json.Valid(trimmed) {
		f.Add(prefix, "malformed JSON: %s", jsonProblem(trimmed))
		return nil, false
	}
	var m map[string]json.RawMessage
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &m) != nil {
		f.Add(prefix, "must be a JSON object")
		return nil, false
	}
	allowed := make(map[string]bool, len(known))
	for _, k := range known {
		allowed[k] = true
	}
	var unknown []string
	for k := range m {
		if !allowed[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		f.Add(path(prefix, k), "unknown field")
	}
	return m, true
}

// decodeField decodes m[key] into v when present, recording a type problem.
func decodeField(f *apierr.Fields, prefix string, m map[string]json.RawMessage, key string, v any, want string) bool {
	raw, ok := m[key]
	if !ok {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		f.Add(path(prefix, key), "must be %s", want)
		return false
	}
	return true
}

func path(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// jsonProblem says where the syntax broke, without Go type names.
func jsonProblem(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return "not valid JSON"
}
