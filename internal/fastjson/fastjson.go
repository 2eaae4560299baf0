// Package fastjson encodes values exactly as encoding/json does (Append:
// json.Encoder with SetEscapeHTML(false), without the trailing newline;
// AppendHTML: json.Marshal), for the plain types it has a plan for: structs of
// strings, booleans, integers, time.Time, pointers and slices of those.
// It follows a plan made once per type instead of encoding/json's
// reflection on every value; a node's 11 KB release record, kept on
// every record, is its work. Anything else (maps, interfaces, floats,
// embedded structs, types with their own marshalling, tag options other
// than omitempty) has no plan, and Append says so: the caller uses
// encoding/json. A string that needs any escaping is written by
// encoding/json itself. TestMatchesEncodingJSON and FuzzMatchesEncodingJSON
// compare the two byte for byte.
package fastjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Append appends v's encoding to dst; ok is false when v's type has no
// plan (dst is then returned as it was given).
func Append(dst []byte, v any) (out []byte, ok bool, err error) { return appendValue(dst, v, false) }

// AppendHTML is Append with HTML escaping on: json.Marshal's bytes.
func AppendHTML(dst []byte, v any) (out []byte, ok bool, err error) { return appendValue(dst, v, true) }

func appendValue(dst []byte, v any, html bool) (out []byte, ok bool, err error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return dst, false, nil
	}
	p := planOf(rv.Type())
	if p == nil {
		return dst, false, nil
	}
	n := len(dst)
	if hint := int(p.size.Load()); cap(dst)-n < hint {
		dst = slices.Grow(dst, hint+hint/8)
	}
	out, err = p.append(dst, rv, html)
	p.size.Store(int64(len(out) - n))
	if err != nil {
		return dst[:n], true, err
	}
	return out, true, nil
}

type kind uint8

const (
	kString kind = iota
	kBool
	kInt
	kUint
	kTime
	kPointer
	kSlice
	kStruct
)

type plan struct {
	// size is the length of the last value encoded from the top of this
	// plan: the next one's first guess, so its bytes are not grown and
	// copied a few times.
	size   atomic.Int64
	kind   kind
	elem   *plan
	fields []field
}

type field struct {
	index     int
	key       []byte // "name":
	omitEmpty bool
	plan      *plan
}

var plans sync.Map // reflect.Type -> *plan (nil: none)

func planOf(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := makePlan(t, map[reflect.Type]*plan{})
	plans.Store(t, p)
	return p
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func makePlan(t reflect.Type, making map[reflect.Type]*plan) *plan {
	if p, ok := making[t]; ok {
		return p
	}
	if t == timeType {
		return &plan{kind: kTime}
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)) {
		return nil
	}
	p := &plan{}
	switch t.Kind() {
	case reflect.String:
		p.kind = kString
	case reflect.Bool:
		p.kind = kBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind = kInt
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		p.kind = kUint // not uint8: a []byte is base64
	case reflect.Pointer:
		// A pointer's own marshalling is its element's (checked there).
		p.kind = kPointer
		making[t] = p
		if p.elem = makePlan(t.Elem(), making); p.elem == nil {
			return nil
		}
	case reflect.Slice:
		p.kind = kSlice
		making[t] = p
		if p.elem = makePlan(t.Elem(), making); p.elem == nil {
			return nil
		}
	case reflect.Struct:
		p.kind = kStruct
		making[t] = p
		names := map[string]bool{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous {
				return nil
			}
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			omit := false
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "":
				case "omitempty":
					omit = true
				default:
					return nil
				}
			}
			if name == "" {
				name = f.Name
			}
			// Two fields of one name: encoding/json's dominance rules.
			if !plainKey(name) || names[name] {
				return nil
			}
			names[name] = true
			fp := makePlan(f.Type, making)
			if fp == nil {
				return nil
			}
			p.fields = append(p.fields, field{index: i, key: []byte(`"` + name + `":`), omitEmpty: omit, plan: fp})
		}
	default:
		return nil
	}
	return p
}

// plainKey: a name encoding/json takes from a tag and writes as it is
// (letters, digits, "_", "-", ".").
func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func (p *plan) append(dst []byte, v reflect.Value, html bool) ([]byte, error) {
	switch p.kind {
	case kString:
		return appendString(dst, v.String(), html)
	case kBool:
		if v.Bool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case kInt:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case kUint:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case kTime:
		b, err := v.Interface().(time.Time).MarshalJSON()
		if err != nil {
			return dst, &json.MarshalerError{Type: timeType, Err: err}
		}
		return append(dst, b...), nil
	case kPointer:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return p.elem.append(dst, v.Elem(), html)
	case kSlice:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = p.elem.append(dst, v.Index(i), html); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case kStruct:
		dst = append(dst, '{')
		first := true
		for _, f := range p.fields {
			fv := v.Field(f.index)
			if f.omitEmpty && empty(f.plan.kind, fv) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.key...)
			var err error
			if dst, err = f.plan.append(dst, fv, html); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, nil
}

// empty is encoding/json's omitempty test for the kinds with a plan.
func empty(k kind, v reflect.Value) bool {
	switch k {
	case kString:
		return v.Len() == 0
	case kBool:
		return !v.Bool()
	case kInt:
		return v.Int() == 0
	case kUint:
		return v.Uint() == 0
	case kPointer:
		return v.IsNil()
	case kSlice:
		return v.Len() == 0
	}
	return false // structs, time.Time among them
}

// appendString writes s quoted; a string that needs any escaping is
// encoding/json's to write.
func appendString(dst []byte, s string, html bool) ([]byte, error) {
	i := 0
	// Eight bytes at a time while none needs a look (most of a record
	// is digests and names).
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		m := x&msb | hasLess(x, 0x20) | hasZero(x^(lsb*'"')) | hasZero(x^(lsb*'\\'))
		if html {
			m |= hasZero(x^(lsb*'<')) | hasZero(x^(lsb*'>')) | hasZero(x^(lsb*'&'))
		}
		if m != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || html && (c == '<' || c == '>' || c == '&') {
			return appendStringSlow(dst, s, html)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

func appendStringSlow(dst []byte, s string, html bool) ([]byte, error) {
	// Valid UTF-8 without escapes is still plain (é, ü, ...).
	if utf8.ValidString(s) && !strings.ContainsAny(s, "\"\\\u2028\u2029") && !hasControl(s) && !(html && strings.ContainsAny(s, "<>&")) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"'), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...), nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasZero: some byte of x is 0 (exact when no byte is past 0x7f, which
// the caller checks too).
func hasZero(x uint64) uint64 { return (x - lsb) &^ x & msb }

// hasLess: some byte of x is below n (n <= 0x80).
func hasLess(x, n uint64) uint64 { return (x - lsb*n) &^ x & msb }

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 {
			return true
		}
	}
	return false
}
