// Package strictjson is the one decoder of outside JSON (every request
// body on both listeners, release manifests, policy documents), so that a
// document means exactly one thing: unknown fields, duplicate keys
// (encoding/json lets the last one win) and keys that match a field only
// case-insensitively are refused, each named by its full path, all at
// once. The struct tags of the target type are the only list of fields;
// a field tagged `strictjson:"ignore"` is accepted whatever it holds and
// never read (a value the server stamps itself).
//
// Values are decoded as they are checked, in one pass over the tokens: a
// value of the wrong type is named and left zero while every other field
// is still decoded, so a caller's value checks can be reported together
// with the decoding problems (DecodeChecked). Normalisations, so that a
// decoded value re-encodes to itself: null means absent, an empty array
// is an empty slice that is not nil (as encoding/json decodes it, so []
// and null stay apart), except in an omitempty field, which encoding/json
// leaves out when empty: there it is nil. Times are in UTC.
package strictjson

import (
	"bytes"
	"encoding"
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

	"github.com/go-json-experiment/json/jsontext"
)

// MaxProblems bounds the list of problems: a 4 MiB body of bad elements
// would otherwise answer with a larger list than the body.
const MaxProblems = 1000

// Problem is one problem of a decoded document, at its path ("" for the
// document, "a.b[2]" inside it).
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problems collects problems so a decode reports all of them.
type Problems []Problem

// Add records a problem at field.
func (p *Problems) Add(field, format string, args ...any) {
	*p = append(*p, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Error is every problem of a document at once, with what it is about.
// It knows nothing of HTTP: the API's error type (apierr) maps it to
// INVALID_INPUT with its problems as fields.
type Error struct {
	Message  string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	for i, p := range e.Problems {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-i)
			break
		}
		if p.Field == "" {
			fmt.Fprintf(&b, "; %s", p.Message)
		} else {
			fmt.Fprintf(&b, "; %s: %s", p.Field, p.Message)
		}
	}
	return b.String()
}

// Decode decodes b into v (a pointer). Every problem is in one *Error.
func Decode(b []byte, v any) error {
	return DecodeChecked(b, v, "the request has fields with problems", func() Problems { return nil })
}

// DecodeChecked decodes b into v, then adds the problems check finds in
// the decoded value, except those at or under a path the decoding already
// faulted (a field of the wrong type is left zero, and "required" on top
// of "must be a string" would only be noise). Every problem is answered
// at once, as one INVALID_INPUT error whose message is what.
func DecodeChecked[P ~[]Problem](b []byte, v any, what string, check func() P) error {
	return decodeChecked(b, v, what, check, nil)
}

// Canonical is what DecodeCheckedCanonical finds out about a document
// besides its value.
type Canonical struct {
	// OK: the document is byte for byte what a json.Encoder with
	// SetEscapeHTML(false) writes for the value decoded (white space
	// after it aside), but for the values of ignored fields, which
	// Ignored locates. A caller that needs the encoding of what it
	// decoded can then take the document's bytes instead of encoding
	// again. Only documents on the fast path (fast.go) are judged;
	// false says nothing about the others.
	OK bool
	// Ignored are the places [start, end) of the ignored fields' values
	// in the document, in its order (when OK).
	Ignored [][2]int
}

// DecodeCheckedCanonical is DecodeChecked, and says whether b is exactly
// the encoding of what it decoded (Canonical). On the fast path the
// strings of the value are parts of one copy of b (one allocation, not
// one a string): a caller that keeps some of them beyond the request
// clones them, or holds all of b's copy.
func DecodeCheckedCanonical[P ~[]Problem](b []byte, v any, what string, check func() P) (Canonical, error) {
	var c Canonical
	err := decodeChecked(b, v, what, check, &c)
	if err != nil {
		c = Canonical{}
	}
	return c, err
}

func decodeChecked[P ~[]Problem](b []byte, v any, what string, check func() P, canon *Canonical) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return &Error{Message: "the request body is empty; a JSON object is expected", Problems: []Problem{{Field: "", Message: "required"}}}
	}
	var fields Problems
	if !decodeFast(b, reflect.ValueOf(v), canon) {
		if err := decode(b, reflect.ValueOf(v), &fields); err != nil {
			return &Error{Message: "the request body is not valid JSON", Problems: []Problem{{Field: "", Message: err.Error()}}}
		}
	}
	if check != nil {
		fields = append(fields, withoutCovered(Problems(check()), fields)...)
	}
	if fields = capped(fields); len(fields) > 0 {
		return &Error{Message: what, Problems: fields}
	}
	return nil
}

// OrEmptyObject is b, or "{}" when b is empty: for bodies that may be
// left out (every field takes its default).
func OrEmptyObject(b []byte) []byte {
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}")
	}
	return b
}

// Check walks b alongside type t without keeping the value, recording
// unknown, duplicate and mis-cased keys and values of the wrong type in
// fields. It fails only on malformed JSON or data after the value.
func Check[P ~[]Problem](b []byte, t reflect.Type, fields *P) error {
	var found Problems
	err := decode(b, reflect.New(t), &found)
	*fields = append(*fields, found...)
	return err
}

// decodeFast fills ptr's target from b on the fast path (fast.go) when
// the target is zero and b has no problem at all; otherwise it leaves the
// target as it was and reports false.
func decodeFast(b []byte, ptr reflect.Value, canon *Canonical) bool {
	if ptr.Kind() != reflect.Pointer || ptr.IsNil() || !fastPath {
		return false
	}
	v := ptr.Elem()
	p := planOf(v.Type())
	if p == nil || !v.IsZero() {
		return false
	}
	if fastDecode(b, v, p, canon) {
		return true
	}
	if canon != nil {
		*canon = Canonical{}
	}
	v.SetZero()
	return false
}

// fastPath is off only in tests that compare the two paths.
var fastPath = true

// decode fills ptr's target from b.
func decode(b []byte, ptr reflect.Value, fields *Problems) error {
	dec := newTokens(b)
	d := decoder{dec: dec, fields: fields}
	if err := d.value(ptr.Elem()); err != nil {
		return err
	}
	if _, err := dec.next(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// decoder walks the tokens alongside the target. The path of the value
// being read is kept as a stack of steps and written out only when a
// problem is reported there: a string per value was most of a large
// body's allocations.
type decoder struct {
	dec    *tokens
	fields *Problems
	path   []step
}

// step is one step of a path: a member's key, or an element's index
// (index >= 0).
type step struct {
	key   string
	index int
}

func (d *decoder) pushKey(key string) { d.path = append(d.path, step{key: key, index: -1}) }
func (d *decoder) pop()               { d.path = d.path[:len(d.path)-1] }

// at is the path of the value being read ("" for the document, "a.b[2]"
// inside it).
func (d *decoder) at() string {
	var b []byte
	for _, s := range d.path {
		switch {
		case s.index >= 0:
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.index), 10)
			b = append(b, ']')
		case len(b) == 0:
			b = append(b, s.key...)
		default:
			b = append(b, '.')
			b = append(b, s.key...)
		}
	}
	return string(b)
}

// problem records a problem at the path being read.
func (d *decoder) problem(format string, args ...any) {
	d.fields.Add(d.at(), format, args...)
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType            = reflect.TypeFor[time.Time]()
)

var opaqueCache sync.Map // reflect.Type -> bool

// opaque types decode themselves (or take anything): no key checks inside.
// The answer is kept per type: Implements on every value of a large body
// was a tenth of its decoding.
func opaque(t reflect.Type) bool {
	// A predeclared type (string, bool, a number) has no methods: no
	// lookup for most of a body's values.
	if t.PkgPath() == "" && (t.Kind() >= reflect.Bool && t.Kind() <= reflect.Float64 || t.Kind() == reflect.String) {
		return false
	}
	if v, ok := opaqueCache.Load(t); ok {
		return v.(bool)
	}
	// []byte is a base64 string, as encoding/json has it.
	o := t.Kind() == reflect.Interface || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 ||
		t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)
	opaqueCache.Store(t, o)
	return o
}

// target is v with pointers followed, allocating them: called once the
// value is known not to be null.
func target(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	return v
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// value reads the next value into v (settable), recording problems at
// the path being read.
func (d *decoder) value(v reflect.Value) error {
	t := deref(v.Type())
	if t == timeType {
		return d.timeValue(v)
	}
	if opaque(t) {
		raw, err := d.dec.rawValue()
		if err != nil {
			return syntaxError(err)
		}
		if string(raw) == "null" {
			return nil
		}
		// A free-form value (facts, say) is still one JSON document: a
		// key twice in one object is refused here too (SPEC 16.10).
		d.duplicateKeys(raw)
		if err := json.Unmarshal(raw, target(v).Addr().Interface()); err != nil {
			d.problem("is not a valid value")
		}
		return nil
	}
	tok, err := d.dec.next()
	if err != nil {
		return syntaxError(err)
	}
	if tok.kind == 'n' {
		return nil // null: absent
	}
	if !fits(tok, t) {
		d.problem("must be %s", kind(t))
		return skip(d.dec, tok)
	}
	switch tok.kind {
	case '[':
		return d.array(v, t)
	case '{':
		if t.Kind() == reflect.Map {
			return d.mapObject(v, t)
		}
		return d.structObject(target(v), t)
	}
	setScalar(target(v), tok)
	return nil
}

// timeValue accepts an RFC 3339 string and keeps it in UTC.
func (d *decoder) timeValue(v reflect.Value) error {
	tok, err := d.dec.next()
	if err != nil {
		return syntaxError(err)
	}
	if tok.kind == 'n' {
		return nil
	}
	const want = "must be an RFC 3339 time, e.g. 2026-07-01T12:00:00Z"
	if tok.isDelim() {
		d.problem(want)
		return skip(d.dec, tok)
	}
	var tm time.Time
	if tok.kind != '"' || tm.UnmarshalText(tok.unquoted()) != nil {
		d.problem(want)
		return nil
	}
	tm = tm.UTC()
	// A time near year 0 or 9999 can leave the range JSON can encode
	// once moved to UTC.
	if y := tm.Year(); y < 0 || y > 9999 {
		d.problem("year out of range")
		return nil
	}
	target(v).Set(reflect.ValueOf(tm))
	return nil
}

// array decodes the elements after '['; an empty array makes v an empty
// slice that is not nil.
func (d *decoder) array(v reflect.Value, t reflect.Type) error {
	d.path = append(d.path, step{index: 0})
	if t.Kind() == reflect.Slice && !d.dec.More() {
		target(v).Set(reflect.MakeSlice(t, 0, 0))
	}
	for i := 0; d.dec.More(); i++ {
		d.path[len(d.path)-1].index = i
		if t.Kind() == reflect.Array {
			el := reflect.New(t.Elem()).Elem()
			if err := d.value(el); err != nil {
				return err
			}
			if i < t.Len() {
				target(v).Index(i).Set(el)
			}
			continue
		}
		// Elements are decoded in place, in a slice of their own (set
		// at the first element, so an empty array leaves v untouched).
		s := target(v)
		if i == 0 {
			s.Set(reflect.MakeSlice(t, 0, 4))
		}
		s.Grow(1)
		s.SetLen(i + 1)
		if err := d.value(s.Index(i)); err != nil {
			return err
		}
	}
	d.pop()
	_, err := d.dec.next()
	return syntaxError(err)
}

// key reads the key of the next member of an object, checks it against
// the object's others (a repeated key, or one differing from another
// only by case, is a problem at its path), and pushes it on the path. A
// key found in known is not copied: known's own string is used.
func (d *decoder) key(seen *keySet, known map[string]field) (string, field, bool, error) {
	tok, err := d.dec.next()
	if err != nil {
		return "", field{}, false, syntaxError(err)
	}
	raw := tok.unquoted()
	f, ok := known[string(raw)]
	key := f.name
	if !ok {
		key = string(raw)
	}
	d.pushKey(key)
	if prev, dup := seen.add(key); dup {
		if prev == key {
			d.problem("given twice")
		} else {
			d.problem("clashes with %q: keys differ only by case", prev)
		}
	}
	return key, f, ok, nil
}

// endObject reads the '}' after the last member.
func (d *decoder) endObject() error {
	_, err := d.dec.next()
	return syntaxError(err)
}

// keySet holds the keys of one object so far, to find one given twice or
// differing from another only by case (strings.ToLower equal). A small
// object's keys are compared in a slice (a map per object was a large
// share of a large body's allocations); past keySetSmall keys, a map.
type keySet struct {
	small [keySetSmall]string
	ascii uint32 // bit i: small[i] is ASCII
	n     int
	big   map[string]string // lower-case key -> the last key given
}

const keySetSmall = 16

// add records key and returns the earlier key it clashes with, if any
// (the last one given, as a map keyed by lower case would hold).
func (k *keySet) add(key string) (prev string, dup bool) {
	if k.big == nil && k.n < keySetSmall {
		ascii := isASCII(key)
		for i := k.n - 1; i >= 0; i-- {
			if sameLower(k.small[i], key, ascii && k.ascii&(1<<i) != 0) {
				prev, dup = k.small[i], true
				break
			}
		}
		k.small[k.n] = key
		if ascii {
			k.ascii |= 1 << k.n
		}
		k.n++
		return prev, dup
	}
	if k.big == nil {
		k.big = make(map[string]string, 2*keySetSmall)
		for _, s := range k.small[:k.n] {
			k.big[strings.ToLower(s)] = s
		}
	}
	lower := strings.ToLower(key)
	prev, dup = k.big[lower]
	k.big[lower] = key
	return prev, dup
}

// sameLower is strings.ToLower(a) == strings.ToLower(b), without
// allocating when both are ASCII (ascii).
func sameLower(a, b string, ascii bool) bool {
	if !ascii {
		// The map this replaces was keyed by ToLower (not case folding).
		la, lb := strings.ToLower(a), strings.ToLower(b)
		return la == lb
	}
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (d *decoder) mapObject(v reflect.Value, t reflect.Type) error {
	m := reflect.MakeMap(t)
	defer target(v).Set(m)
	var seen keySet
	for d.dec.More() {
		key, _, _, err := d.key(&seen, nil)
		if err != nil {
			return err
		}
		el := reflect.New(t.Elem()).Elem()
		if err := d.value(el); err != nil {
			return err
		}
		if t.Key().Kind() == reflect.String {
			m.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), el)
		}
		d.pop()
	}
	return d.endObject()
}

func (d *decoder) structObject(v reflect.Value, t reflect.Type) error {
	known := structFields(t)
	var seen keySet
	for d.dec.More() {
		_, f, ok, err := d.key(&seen, known)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			d.problem("unknown field")
			err = skipValue(d.dec)
		case f.ignore:
			err = skipValue(d.dec)
		default:
			fv := fieldByIndex(v, f.index)
			if err = d.value(fv); f.omitEmpty {
				emptyIsAbsent(fv)
			}
		}
		if err != nil {
			return err
		}
		d.pop()
	}
	return d.endObject()
}

// fieldByIndex is v.FieldByIndex, allocating embedded struct pointers.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 {
			v = target(v)
		}
		v = v.Field(x)
	}
	return v
}

// setScalar sets v from a string, boolean or number token that fits it.
func setScalar(v reflect.Value, tok token) {
	switch tok.kind {
	case '"':
		v.SetString(tok.str())
	case 't', 'f':
		v.SetBool(tok.kind == 't')
	case '0':
		switch v.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, _ := strconv.ParseInt(string(tok.raw), 10, 64) // fits checked it
			v.SetInt(n)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			n, _ := strconv.ParseUint(string(tok.raw), 10, 64)
			v.SetUint(n)
		default:
			f, _ := strconv.ParseFloat(string(tok.raw), 64)
			v.SetFloat(f)
		}
	}
}

type field struct {
	name      string // its JSON name
	index     []int
	ignore    bool // tagged strictjson:"ignore": accepted, never read
	omitEmpty bool // tagged omitempty
}

// emptyIsAbsent makes an empty slice or map of an omitempty field nil:
// encoding/json leaves the field out, so that is what it decodes to
// again. Elsewhere [] stays an empty slice, apart from null.
func emptyIsAbsent(v reflect.Value) {
	if (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 && !v.IsNil() {
		v.SetZero()
	}
}

var fieldCache sync.Map // reflect.Type -> map[string]field

// structFields maps each JSON name of t (promoted fields included) to its
// field, exactly as encoding/json names them.
func structFields(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m := map[string]field{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if ft := deref(f.Type); ft.Kind() == reflect.Struct {
				for k, v := range structFields(ft) {
					if _, shadowed := m[k]; !shadowed {
						m[k] = field{name: k, index: append([]int{i}, v.index...), ignore: v.ignore, omitEmpty: v.omitEmpty}
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
		m[name] = field{name: name, index: []int{i}, ignore: f.Tag.Get("strictjson") == "ignore",
			omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	fieldCache.Store(t, m)
	return m
}

func skipValue(dec *tokens) error {
	tok, err := dec.next()
	if err != nil {
		return syntaxError(err)
	}
	return skip(dec, tok)
}

// skip consumes the rest of a container whose opening tok was just read
// (nothing for any other token).
func skip(dec *tokens, tok token) error {
	if tok.kind != '{' && tok.kind != '[' {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.dec.ReadToken() // only its kind is read: no copy
		if err != nil {
			return syntaxError(err)
		}
		switch tok.Kind() {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return nil
}

func syntaxError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON")
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return fmt.Errorf("syntax error at byte %d", se.ByteOffset)
	}
	return err
}

// fits reports whether a token can decode into t.
func fits(tok token, t reflect.Type) bool {
	switch tok.kind {
	case '{':
		return t.Kind() == reflect.Struct || (t.Kind() == reflect.Map && t.Key().Kind() == reflect.String)
	case '[':
		return t.Kind() == reflect.Slice || t.Kind() == reflect.Array
	case '}', ']':
		return true
	case '"':
		return t.Kind() == reflect.String
	case 't', 'f':
		return t.Kind() == reflect.Bool
	case '0':
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err := strconv.ParseInt(string(tok.raw), 10, t.Bits())
			return err == nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			_, err := strconv.ParseUint(string(tok.raw), 10, t.Bits())
			return err == nil
		case reflect.Float32, reflect.Float64:
			_, err := strconv.ParseFloat(string(tok.raw), t.Bits())
			return err == nil
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
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	}
	return "a number"
}

// withoutCovered drops checks at or under a path the decoder already
// faulted. It looks up each prefix of a check's path, so a body with many
// problems stays cheap.
func withoutCovered(checks, decoded Problems) Problems {
	if len(decoded) == 0 {
		return checks
	}
	faulted := make(map[string]bool, len(decoded))
	for _, p := range decoded {
		faulted[p.Field] = true
	}
	if faulted[""] {
		return nil
	}
	var out Problems
	for _, c := range checks {
		if !coveredBy(c.Field, faulted) {
			out = append(out, c)
		}
	}
	return out
}

// coveredBy reports whether path or one of its parents is in faulted.
func coveredBy(path string, faulted map[string]bool) bool {
	for {
		if faulted[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return false
		}
		path = path[:i]
	}
}

// capped keeps the first MaxProblems and says how many were left out.
func capped(f Problems) Problems {
	if len(f) <= MaxProblems {
		return f
	}
	more := len(f) - MaxProblems
	out := append(Problems(nil), f[:MaxProblems]...)
	out.Add("", "%d more problems not listed", more)
	return out
}

// duplicateKeys records, at its path, each key that appears twice in one
// object of raw (a well-formed JSON value read at the path being read),
// at any depth.
func (d *decoder) duplicateKeys(raw json.RawMessage) {
	// A scalar has no keys: most free-form values are.
	if len(raw) == 0 || raw[0] != '{' && raw[0] != '[' {
		return
	}
	dec := newTokens(raw)
	depth := len(d.path)
	defer func() { d.path = d.path[:depth] }()
	var walk func() error
	walk = func() error {
		tok, err := dec.next()
		if err != nil {
			return err
		}
		switch tok.kind {
		case '[':
			d.path = append(d.path, step{})
			for i := 0; dec.More(); i++ {
				d.path[len(d.path)-1].index = i
				if err := walk(); err != nil {
					return err
				}
			}
			d.pop()
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.next()
				if err != nil {
					return err
				}
				k := kt.str()
				d.pushKey(k)
				if seen[k] {
					d.problem("duplicate key")
				}
				seen[k] = true
				if err := walk(); err != nil {
					return err
				}
				d.pop()
			}
		default:
			return nil
		}
		_, err = dec.next() // the closing delimiter
		return err
	}
	_ = walk()
}
