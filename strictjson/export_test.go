package strictjson

import "reflect"

// DecodeFastOnly is the fast path alone: whether it decoded b into v.
func DecodeFastOnly(b []byte, v any) bool { return decodeFast(b, reflect.ValueOf(v), nil) }

// DecodeFullOnly is the full decoder alone: the problems it finds while
// decoding b into v, and its error for a document that is not JSON.
func DecodeFullOnly(b []byte, v any) (Problems, error) {
	var fields Problems
	err := decode(b, reflect.ValueOf(v), &fields)
	return fields, err
}

// DecodeFastCanonical is the fast path alone, with its Canonical.
func DecodeFastCanonical(b []byte, v any) (bool, Canonical) {
	var c Canonical
	ok := decodeFast(b, reflect.ValueOf(v), &c)
	return ok, c
}
