package strictjson

import (
	"bytes"
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// tokens reads the tokens of one document as encoding/json's Decoder
// (with UseNumber) gives them (string, bool, json.Number, nil for null,
// json.Delim), from jsontext's tokenizer: encoding/json's Token allocated
// and boxed every token, and was most of the CPU of a large request (an
// 11 KB node record took 0.6 ms). Duplicate names are left to the decoder
// (it names them at their path), and invalid UTF-8 is replaced, as
// encoding/json does.
type tokens struct {
	dec *jsontext.Decoder
}

func newTokens(b []byte) *tokens {
	return &tokens{dec: jsontext.NewDecoder(bytes.NewReader(b),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))}
}

// Token is the next token.
func (t *tokens) Token() (json.Token, error) {
	tok, err := t.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch k := tok.Kind(); k {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	default: // { } [ ]
		return json.Delim(k), nil
	}
}

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
