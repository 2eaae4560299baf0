package strictjson

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// tokens reads the tokens of one document from jsontext's tokenizer,
// without boxing them or copying a string until one is kept:
// encoding/json's Token allocated and boxed every token, and was most of
// the CPU of a large request. Duplicate names are left to the decoder (it
// names them at their path), and invalid UTF-8 is replaced, as
// encoding/json does.
type tokens struct {
	dec *jsontext.Decoder
}

func newTokens(b []byte) *tokens {
	return &tokens{dec: jsontext.NewDecoder(bytes.NewReader(b),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))}
}

// token is one token: kind is 'n' (null), 't', 'f', '"' (a string), '0'
// (a number), or a delimiter ('{', '}', '[', ']'). raw is a string's or
// a number's bytes as written (a string quoted), valid until the next
// read.
type token struct {
	kind byte
	raw  []byte
}

// next is the next token.
func (t *tokens) next() (token, error) {
	switch k := t.dec.PeekKind(); k {
	case '"', '0':
		v, err := t.dec.ReadValue()
		if err != nil {
			return token{}, err
		}
		return token{kind: byte(k), raw: v}, nil
	}
	tok, err := t.dec.ReadToken()
	if err != nil {
		return token{}, err
	}
	k := tok.Kind()
	if k == 'f' || k == 't' {
		if tok.Bool() {
			k = 't'
		} else {
			k = 'f'
		}
	}
	return token{kind: byte(k)}, nil
}

// isDelim reports whether tok opens or closes an object or an array.
func (tok token) isDelim() bool {
	return tok.kind == '{' || tok.kind == '}' || tok.kind == '[' || tok.kind == ']'
}

// unquoted is a string token's value: a slice of raw when written without
// escapes in valid UTF-8, else decoded (invalid UTF-8 replaced).
func (tok token) unquoted() []byte {
	s := tok.raw[1 : len(tok.raw)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s
	}
	u, _ := jsontext.AppendUnquote(nil, tok.raw) // an error only says invalid UTF-8 was replaced
	return u
}

// str is a string token's value, as its own string.
func (tok token) str() string { return string(tok.unquoted()) }

// More reports whether the current object or array has another element.
func (t *tokens) More() bool {
	k := t.dec.PeekKind()
	return k != ']' && k != '}' && k != 0
}

// rawValue reads the next value whole, as its own bytes.
func (t *tokens) rawValue() (json.RawMessage, error) {
	v, err := t.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.Clone(v)), nil
}
