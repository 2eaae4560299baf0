package strictjson

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The fast path decodes a document that has no problem at all, which is
// nearly every document a client sends (an agent's 11 KB release record
// on every change): one pass over the bytes, following a plan made once
// per type, with no tokenizer, no path and no key sets. It gives up
// (false) at the first thing it does not take exactly as the full
// decoder would: a problem of any kind, an escape in a string, invalid
// UTF-8, deep nesting, a type it has no plan for. The full decoder then
// decodes the document from the start and names every problem, with the
// same messages as before. So the fast path needs only to be right about
// what it accepts: the value it decodes is the one the full decoder
// would, and the full decoder would find no problem (FuzzFastPath checks
// both against the full decoder).

// plan is how the fast path decodes one type.
type plan struct {
	kind planKind
	typ  reflect.Type
	bits int   // numbers: their size
	elem *plan // pointers and slices
	// lastLen is a slice's length the last time one was decoded (at
	// most maxLenHint): the next starts with that room, as the lists
	// of one kind of document have much the same length (a record's
	// 30 packages and 36 pins grew four times each).
	lastLen atomic.Int32
	// canon: a value of this type may be judged canonical (Canonical);
	// false for floats (encoding/json picks among their forms), types
	// that encode themselves, and structs with a field tagged string or
	// omitzero.
	canon bool
	// Structs: each JSON name (promoted fields included) and its field,
	// and the fields in declaration order: the order encoding/json
	// writes them, which is how nearly every document lists them, so
	// the key after field k is looked for at order[k+1] before the map.
	fields map[string]planField
	order  []planField
}

type planKind uint8

const (
	planString planKind = iota
	planBool
	planInt
	planUint
	planFloat
	planTime
	planPointer
	planSlice
	planStruct
)

type planField struct {
	name      string
	pos       int // in order
	index     []int
	plan      *plan
	ignore    bool
	omitEmpty bool   // tagged omitempty: encoding/json leaves it out when empty
	plainName bool   // name is printable ASCII without '"' or '\'
	bit       uint64 // this field's bit in a set of the keys seen
}

var plans sync.Map // reflect.Type -> *plan, nil when the type has none

// planOf is t's plan, nil when the fast path does not decode t.
func planOf(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := makePlan(t, map[reflect.Type]*plan{})
	plans.Store(t, p)
	return p
}

// makePlan makes t's plan; making holds the plans being made (types
// that contain themselves).
func makePlan(t reflect.Type, making map[reflect.Type]*plan) *plan {
	if p, ok := making[t]; ok {
		return p
	}
	if t == timeType {
		return &plan{kind: planTime, typ: t, canon: true}
	}
	p := &plan{typ: t, canon: !encodesItself(t)}
	if t.Kind() == reflect.Pointer {
		p.kind = planPointer
		p.canon = true // its target's encoding
		making[t] = p
		if p.elem = makePlan(t.Elem(), making); p.elem == nil {
			return nil
		}
		return p
	}
	if opaque(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		p.kind = planString
	case reflect.Bool:
		p.kind = planBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind, p.bits = planInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		p.kind, p.bits = planUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		p.kind, p.bits = planFloat, t.Bits()
		p.canon = false
	case reflect.Slice:
		p.kind = planSlice
		making[t] = p
		if p.elem = makePlan(t.Elem(), making); p.elem == nil {
			return nil
		}
	case reflect.Struct:
		p.kind = planStruct
		making[t] = p
		known := structFields(t)
		if len(known) > 64 {
			return nil
		}
		p.fields = make(map[string]planField, len(known))
		lower := map[string]bool{}
		bit := uint64(1)
		for name, f := range known {
			// Two names equal but for case: the full decoder judges
			// which one clashes.
			if l := strings.ToLower(name); lower[l] {
				return nil
			} else {
				lower[l] = true
			}
			pf := planField{name: name, index: f.index, ignore: f.ignore, omitEmpty: f.omitEmpty, bit: bit, plainName: plainName(name)}
			bit <<= 1
			if len(f.index) == 1 {
				_, opts, _ := strings.Cut(t.Field(f.index[0]).Tag.Get("json"), ",")
				for o := range strings.SplitSeq(opts, ",") {
					if o == "string" || o == "omitzero" {
						p.canon = false // encoded otherwise
					}
				}
			}
			if !f.ignore {
				ft := t.FieldByIndex(f.index).Type
				if pf.plan = makePlan(ft, making); pf.plan == nil {
					return nil
				}
			}
			p.fields[name] = pf
		}
		// A promoted field through a pointer to an embedded struct:
		// left to the full decoder.
		for _, f := range p.fields {
			if len(f.index) > 1 {
				return nil
			}
			p.order = append(p.order, f)
		}
		slices.SortFunc(p.order, func(a, b planField) int { return cmp.Compare(a.index[0], b.index[0]) })
		for k := range p.order {
			p.order[k].pos = k
			p.fields[p.order[k].name] = p.order[k]
		}
	default:
		return nil
	}
	return p
}

func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// encodesItself: encoding/json writes t's values by a method of t's.
func encodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(marshalerType) || pt.Implements(marshalerType) ||
		t.Implements(textMarshalerType) || pt.Implements(textMarshalerType)
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// fastDecode decodes b into v, settable and zero, and reports whether it
// did; when it did not, v may hold part of the document. When canon is
// not nil it is told whether b is v's encoding (Canonical).
func fastDecode(b []byte, v reflect.Value, p *plan, canon *Canonical) bool {
	d := fastDecoder{b: b, canon: true, track: canon != nil}
	if canon != nil {
		d.whole = string(b) // one copy for every string (Canonical)
	}
	if !d.value(v, p, 0) {
		return false
	}
	ok := d.canon
	d.space()
	if canon != nil {
		*canon = Canonical{OK: ok}
		if ok {
			canon.Ignored = d.ignored
		}
	}
	return d.i == len(d.b)
}

type fastDecoder struct {
	b []byte
	i int
	// canon: nothing read so far is other than encoding/json writes it
	// (Canonical); track: the ignored values' places are kept.
	canon, track bool
	ignored      [][2]int
	// whole, when not empty, is b as a string: the strings decoded are
	// parts of it, not copies of their own.
	whole string
}

// text is s, which str read from d.b ending at d.i-1, as a string.
func (d *fastDecoder) text(s []byte) string {
	if d.whole == "" {
		return string(s)
	}
	end := d.i - 1
	return d.whole[end-len(s) : end]
}

// isEmpty is encoding/json's test for leaving an omitempty field out.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// omittedAll: every field of p.order[from:to] is one encoding/json leaves
// out when empty (as an absent field is).
func omittedAll(p *plan, from, to int) bool {
	for _, f := range p.order[from:to] {
		if !f.omitEmpty {
			return false
		}
	}
	return true
}

// maxLenHint bounds the room a slice starts with: a long list in one
// document does not make every later one allocate as much.
const maxLenHint = 256

// maxFastDepth bounds nesting on the fast path (the full decoder takes
// deeper documents).
const maxFastDepth = 256

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
			d.canon = false // encoding/json writes none
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (d *fastDecoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// literal consumes word (null, true, false) at d.i.
func (d *fastDecoder) literal(word string) bool {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

// str reads a string at d.i (its opening quote) and returns its content:
// only strings without escapes, control characters or invalid UTF-8.
func (d *fastDecoder) str() ([]byte, bool) {
	start := d.i + 1
	ascii := true
	j := start
	// Eight bytes at a time while none is a quote, a backslash, a
	// control character or past ASCII (most of a record is digests).
	for ; j+8 <= len(d.b); j += 8 {
		x := binary.LittleEndian.Uint64(d.b[j:])
		if m := (hasLess(x, 0x20) | hasZero(x^(lsb*'"')) | hasZero(x^(lsb*'\\')) | x) & msb; m != 0 {
			// The lowest byte marked is the first such byte (a false
			// mark can only follow a true one): the bytes loop starts
			// there.
			j += bits.TrailingZeros64(m) >> 3
			break
		}
	}
	for ; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			s := d.b[start:j]
			if !ascii {
				if !utf8.Valid(s) {
					return nil, false
				}
				// encoding/json escapes these two.
				if bytes.Contains(s, lineSep) || bytes.Contains(s, paraSep) {
					d.canon = false
				}
			}
			d.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

var lineSep, paraSep = []byte("\u2028"), []byte("\u2029")

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasZero: some byte of x is 0 (exact when no byte of x is past 0x7f,
// which the caller checks as well).
func hasZero(x uint64) uint64 { return (x - lsb) &^ x & msb }

// hasLess: some byte of x is below n (n <= 0x80; exact for bytes up to
// 0x7f).
func hasLess(x, n uint64) uint64 { return (x - lsb*n) &^ x & msb }

// plainKey reads f's name as the key at d.i (its opening quote) if it
// is there, written as it is: a name with no byte a JSON string would
// escape or hold otherwise.
func (d *fastDecoder) plainKey(f planField) bool {
	end := d.i + 1 + len(f.name)
	if !f.plainName || end >= len(d.b) || d.b[end] != '"' || string(d.b[d.i+1:end]) != f.name {
		return false
	}
	d.i = end + 1
	return true
}

// number reads a number at d.i, as JSON writes one.
func (d *fastDecoder) number() ([]byte, bool) {
	b, j := d.b, d.i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return nil, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == k {
			return nil, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == k {
			return nil, false
		}
	}
	raw := b[d.i:j]
	d.i = j
	return raw, true
}

// value decodes the next value into v following p.
func (d *fastDecoder) value(v reflect.Value, p *plan, depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	c := d.peek()
	if !p.canon {
		d.canon = false
	}
	if c == 'n' {
		// null: absent, which encoding/json writes as null only for a
		// pointer or a slice.
		if p.kind != planPointer && p.kind != planSlice {
			d.canon = false
		}
		return d.literal("null")
	}
	switch p.kind {
	case planPointer:
		if v.IsNil() {
			v.Set(reflect.New(p.typ.Elem()))
		}
		return d.value(v.Elem(), p.elem, depth)
	case planString:
		if c != '"' {
			return false
		}
		s, ok := d.str()
		if ok {
			v.SetString(d.text(s))
		}
		return ok
	case planBool:
		switch c {
		case 't':
			v.SetBool(true)
			return d.literal("true")
		case 'f':
			v.SetBool(false)
			return d.literal("false")
		}
		return false
	case planInt, planUint, planFloat:
		if c != '-' && (c < '0' || c > '9') {
			return false
		}
		raw, ok := d.number()
		if !ok {
			return false
		}
		if len(raw) == 2 && raw[0] == '-' && raw[1] == '0' {
			d.canon = false // written 0
		}
		switch p.kind {
		case planInt:
			n, err := strconv.ParseInt(string(raw), 10, p.bits)
			v.SetInt(n)
			return err == nil
		case planUint:
			n, err := strconv.ParseUint(string(raw), 10, p.bits)
			v.SetUint(n)
			return err == nil
		}
		f, err := strconv.ParseFloat(string(raw), p.bits)
		v.SetFloat(f)
		return err == nil
	case planTime:
		if c != '"' {
			return false
		}
		s, ok := d.str()
		var tm time.Time
		if !ok || tm.UnmarshalText(s) != nil {
			return false
		}
		tm = tm.UTC()
		if y := tm.Year(); y < 0 || y > 9999 {
			return false
		}
		if d.canon {
			var buf [64]byte
			if string(tm.AppendFormat(buf[:0], time.RFC3339Nano)) != string(s) {
				d.canon = false
			}
		}
		*v.Addr().Interface().(*time.Time) = tm
		return true
	case planSlice:
		if c != '[' {
			return false
		}
		d.i++
		if d.peek() == ']' {
			d.i++
			// Empty, not nil, as encoding/json decodes it: [] and null
			// say different things (a collector that ran and found
			// nothing, against one never read).
			v.Set(reflect.MakeSlice(p.typ, 0, 0))
			return true
		}
		v.Set(reflect.MakeSlice(p.typ, 0, max(4, int(p.lastLen.Load()))))
		for n := 0; ; n++ {
			if n == v.Cap() {
				v.Grow(n) // doubled
			}
			v.SetLen(n + 1)
			if !d.value(v.Index(n), p.elem, depth+1) {
				return false
			}
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				p.lastLen.Store(int32(min(n+1, maxLenHint)))
				return true
			default:
				return false
			}
		}
	case planStruct:
		if c != '{' {
			return false
		}
		d.i++
		if d.peek() == '}' {
			d.i++
			if !omittedAll(p, 0, len(p.order)) {
				d.canon = false
			}
			return true
		}
		var seen uint64
		next := 0 // in p.order: the field expected next
		for {
			if d.peek() != '"' {
				return false
			}
			var f planField
			if next < len(p.order) && d.plainKey(p.order[next]) {
				f = p.order[next]
			} else {
				key, ok := d.str()
				if !ok {
					return false
				}
				if f, ok = p.fields[string(key)]; !ok {
					return false
				}
			}
			if seen&f.bit != 0 {
				return false
			}
			// encoding/json writes the fields in order, leaving out
			// only empty omitempty ones.
			if f.pos < next || !omittedAll(p, next, f.pos) {
				d.canon = false
			}
			next = f.pos + 1
			seen |= f.bit
			if d.peek() != ':' {
				return false
			}
			d.i++
			var ok bool
			if f.ignore {
				start := d.i
				ok = d.skip(depth + 1)
				if d.track {
					d.ignored = append(d.ignored, [2]int{start, d.i})
				}
			} else {
				fv := v.Field(f.index[0])
				ok = d.value(fv, f.plan, depth+1)
				if f.omitEmpty {
					if d.canon && isEmpty(fv) {
						d.canon = false // left out
					}
					emptyIsAbsent(fv)
				}
			}
			if !ok {
				return false
			}
			switch d.peek() {
			case ',':
				d.i++
			case '}':
				d.i++
				if !omittedAll(p, next, len(p.order)) {
					d.canon = false
				}
				return true
			default:
				return false
			}
		}
	}
	return false
}

// skip reads any value (a field never read), checking that it is JSON.
func (d *fastDecoder) skip(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	switch c := d.peek(); c {
	case 'n':
		return d.literal("null")
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case '"':
		_, ok := d.str()
		return ok
	case '[', '{':
		d.i++
		end := byte(']')
		if c == '{' {
			end = '}'
		}
		if d.peek() == end {
			d.i++
			return true
		}
		for {
			if c == '{' {
				if d.peek() != '"' {
					return false
				}
				if _, ok := d.str(); !ok || d.peek() != ':' {
					return false
				}
				d.i++
			}
			if !d.skip(depth + 1) {
				return false
			}
			switch d.peek() {
			case ',':
				d.i++
			case end:
				d.i++
				return true
			default:
				return false
			}
		}
	default:
		if c == '-' || c >= '0' && c <= '9' {
			_, ok := d.number()
			return ok
		}
	}
	return false
}
