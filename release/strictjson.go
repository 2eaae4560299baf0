package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeStrict decodes a signed JSON document into v and refuses what
// encoding/json would otherwise let through silently: unknown fields,
// duplicate keys (the last one would win), keys differing from the schema
// only by case (encoding/json matches them case-insensitively) and data
// after the value. A signed document must mean exactly one thing.
func decodeStrict(b []byte, known map[string]bool, v any) error {
	if err := checkKeys(b, known); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return nil
}

// checkKeys walks the tokens of b: every object key must be in known
// (exact case) and appear once in its object, and b must hold one value.
func checkKeys(b []byte, known map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		keys   map[string]bool
	}
	var stack []frame
	expectKey := false
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(stack) == 0 {
			values++
			if values > 1 {
				return fmt.Errorf("data after the JSON value")
			}
		}
		if expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				expectKey = len(stack) > 0 && stack[len(stack)-1].object
				continue
			}
			key := tok.(string) // the decoder guarantees a string key here
			top := &stack[len(stack)-1]
			if !known[key] {
				return fmt.Errorf("unknown field %q", key)
			}
			if top.keys[key] {
				return fmt.Errorf("duplicate field %q", key)
			}
			top.keys[key] = true
			expectKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, keys: map[string]bool{}})
			expectKey = true
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// After a value inside an object, the next token is a key.
		expectKey = len(stack) > 0 && stack[len(stack)-1].object
	}
	if values == 0 {
		return fmt.Errorf("empty document")
	}
	return nil
}
