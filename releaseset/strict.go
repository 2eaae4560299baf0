package releaseset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"stratum/apierr"
)

// The strict decoder exists because encoding/json stops at the first
// problem, names no path for an unknown field and matches keys without
// regard to case. A release record is large and written by another
// program, so its author gets every problem at once, each at its JSON
// path. It parses once into a generic tree, then fills the typed value by
// reflection over the json tags, so the types stay the one description of
// the format.
//
// Normalisations, so that a decoded value re-encodes to itself: null means
// absent; an empty array is a nil slice; times are in UTC.

// strictDecoder fills typed values from a generic JSON tree.
type strictDecoder struct {
	problems apierr.Fields
	// ignore names paths whose value is skipped whatever it is.
	ignore map[string]bool
}

// parseJSON parses one JSON value with numbers kept exact. Anything after
// it is an error.
func parseJSON(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the body is empty; expected a JSON object")
		}
		return nil, fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("malformed JSON: data after the top-level value")
	}
	return raw, nil
}

var timeType = reflect.TypeFor[time.Time]()

// fill sets v from raw, recording a problem at path for each value of the
// wrong type and each unknown field.
func (d *strictDecoder) fill(raw any, v reflect.Value, path string) {
	if raw == nil || d.ignore[path] {
		return
	}
	t := v.Type()
	if t == timeType {
		d.fillTime(raw, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.fill(raw, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.fillStruct(raw, v, path)
	case reflect.Slice:
		arr, ok := raw.([]any)
		if !ok {
			d.problems.Add(path, "must be an array")
			return
		}
		if len(arr) == 0 {
			return
		}
		s := reflect.MakeSlice(t, len(arr), len(arr))
		for i, el := range arr {
			d.fill(el, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		v.Set(s)
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			d.problems.Add(path, "must be a string")
			return
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			d.problems.Add(path, "must be true or false")
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := raw.(json.Number)
		if !ok {
			d.problems.Add(path, "must be a number")
			return
		}
		i, err := strconv.ParseInt(n.String(), 10, t.Bits())
		if err != nil {
			d.problems.Add(path, "must be a whole number in range")
			return
		}
		v.SetInt(i)
	default:
		// Only reachable if a type gains a field kind this file does
		// not know; the tests decode every type, so they would catch it.
		d.problems.Add(path, "cannot be decoded (%s)", t.Kind())
	}
}

// fillTime accepts an RFC 3339 string and keeps it in UTC.
func (d *strictDecoder) fillTime(raw any, v reflect.Value, path string) {
	s, ok := raw.(string)
	if !ok {
		d.problems.Add(path, "must be an RFC 3339 time string")
		return
	}
	var tm time.Time
	if err := tm.UnmarshalText([]byte(s)); err != nil {
		d.problems.Add(path, "must be an RFC 3339 time, e.g. 2026-07-01T12:00:00Z")
		return
	}
	tm = tm.UTC()
	// A time near year 0 or 9999 can leave the range JSON can encode
	// once moved to UTC.
	if y := tm.Year(); y < 0 || y > 9999 {
		d.problems.Add(path, "year out of range")
		return
	}
	v.Set(reflect.ValueOf(tm))
}

// fillStruct fills known fields in declaration order, then names every
// unknown key (sorted, so the answer is stable).
func (d *strictDecoder) fillStruct(raw any, v reflect.Value, path string) {
	m, ok := raw.(map[string]any)
	if !ok {
		d.problems.Add(path, "must be an object")
		return
	}
	fields := jsonFields(v.Type())
	for _, f := range fields {
		if val, ok := m[f.name]; ok {
			d.fill(val, v.Field(f.index), join(path, f.name))
		}
	}
	var unknown []string
	for k := range m {
		if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == k }) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		d.problems.Add(join(path, k), "unknown field")
	}
}

// join appends a key to a path ("" is the whole body).
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type jsonField struct {
	name  string
	index int
}

var fieldCache sync.Map // reflect.Type -> []jsonField

// jsonFields lists a struct's fields by their json names.
func jsonFields(t reflect.Type) []jsonField {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]jsonField)
	}
	var out []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, jsonField{name: name, index: i})
	}
	fieldCache.Store(t, out)
	return out
}

// reflectValue is the settable value behind a pointer.
func reflectValue(p any) reflect.Value { return reflect.ValueOf(p).Elem() }
