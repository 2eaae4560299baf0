// Package strictjson decodes outside JSON so that it means exactly one
// thing: unknown fields, duplicate keys (encoding/json lets the last one
// win) and keys that match a field only case-insensitively are refused,
// each named by its full path, all at once.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"stratum/apierr"
)

// Decode checks b against v's type and decodes it into v. Every problem is
// an apierr.FieldError in one INVALID_INPUT error.
func Decode(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return apierr.WithFields(apierr.InvalidInput, "the request body is empty; a JSON object is expected", []apierr.FieldError{{Field: "", Message: "required"}})
	}
	var fields apierr.Fields
	if err := Check(b, reflect.TypeOf(v), &fields); err != nil {
		return apierr.WithFields(apierr.InvalidInput, "the request body is not valid JSON", []apierr.FieldError{{Field: "", Message: err.Error()}})
	}
	if len(fields) > 0 {
		return fields.Err("the request has fields with problems")
	}
	if err := json.Unmarshal(b, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return apierr.WithFields(apierr.InvalidInput, "a field has the wrong type", []apierr.FieldError{{Field: typeErr.Field, Message: "must be " + kind(typeErr.Type)}})
		}
		return apierr.WithFields(apierr.InvalidInput, "the request body is not valid JSON", []apierr.FieldError{{Field: "", Message: err.Error()}})
	}
	return nil
}

// Check walks the tokens of b alongside type t, recording unknown,
// duplicate and mis-cased keys in fields. It fails only on malformed JSON
// or data after the value.
func Check(b []byte, t reflect.Type, fields *apierr.Fields) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walk(dec, t, "", fields); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque types decode themselves (or take anything): no key checks inside.
func opaque(t reflect.Type) bool {
	if t == nil || t.Kind() == reflect.Interface {
		return true
	}
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)
}

func walk(dec *json.Decoder, t reflect.Type, path string, fields *apierr.Fields) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	d, isDelim := tok.(json.Delim)
	if opaque(t) {
		if isDelim {
			return skip(dec, d)
		}
		return nil
	}
	if !fits(tok, t) {
		fields.Add(path, "must be %s", kind(t))
		if isDelim {
			return skip(dec, d)
		}
		return nil
	}
	if !isDelim {
		return nil
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", path, i), fields); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return syntaxError(err)
	case '{':
		var known map[string]reflect.Type
		var mapElem reflect.Type
		switch t.Kind() {
		case reflect.Struct:
			known = structFields(t)
		case reflect.Map:
			mapElem = t.Elem()
		}
		seen := map[string]string{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return syntaxError(err)
			}
			key := tok.(string)
			at := join(path, key)
			if prev, dup := seen[strings.ToLower(key)]; dup {
				if prev == key {
					fields.Add(at, "given twice")
				} else {
					fields.Add(at, "clashes with %q: keys differ only by case", prev)
				}
			}
			seen[strings.ToLower(key)] = key
			var next reflect.Type
			switch {
			case mapElem != nil:
				next = mapElem
			case known != nil:
				ft, ok := known[key]
				if !ok {
					fields.Add(at, "unknown field")
					if err := skipValue(dec); err != nil {
						return err
					}
					continue
				}
				next = ft
			}
			if err := walk(dec, next, at, fields); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return syntaxError(err)
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields maps each JSON name of t (promoted fields included) to its
// type, exactly as encoding/json names them.
func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range structFields(ft) {
					if _, shadowed := m[k]; !shadowed {
						m[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}

func skipValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	if d, ok := tok.(json.Delim); ok {
		return skip(dec, d)
	}
	return nil
}

// skip consumes the rest of a container whose opening d was just read.
func skip(dec *json.Decoder, d json.Delim) error {
	if d != '{' && d != '[' {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func syntaxError(err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("syntax error at byte %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON")
	}
	return err
}

// fits reports whether a token can decode into t (null fits anything).
func fits(tok json.Token, t reflect.Type) bool {
	if t == nil {
		return true
	}
	switch v := tok.(type) {
	case nil:
		return true
	case json.Delim:
		switch v {
		case '{':
			return t.Kind() == reflect.Struct || t.Kind() == reflect.Map
		case '[':
			return t.Kind() == reflect.Slice || t.Kind() == reflect.Array
		}
		return true
	case string:
		return t.Kind() == reflect.String
	case bool:
		return t.Kind() == reflect.Bool
	case json.Number:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err := v.Int64()
			return err == nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			_, err := strconv.ParseUint(v.String(), 10, 64)
			return err == nil
		case reflect.Float32, reflect.Float64:
			return true
		}
	}
	return false
}

func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}
