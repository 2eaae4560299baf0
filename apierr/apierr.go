// Package apierr is the one error type the domain returns: it carries the
// spec's code, a message a person can act on, and the structured parts
// (fields, policy issues, details). The HTTP layer maps Code to a status;
// nothing ever matches on message text.
package apierr

import (
	"errors"
	"fmt"
	"strings"

	"stratum/strictjson"
)

// Code is one of the error codes of SPEC section 2.
type Code string

const (
	InvalidInput         Code = "INVALID_INPUT"
	InvalidPolicy        Code = "INVALID_POLICY"
	Unauthenticated      Code = "UNAUTHENTICATED"
	JoinTokenInvalid     Code = "JOIN_TOKEN_INVALID"
	Forbidden            Code = "FORBIDDEN"
	NotFound             Code = "NOT_FOUND"
	MethodNotAllowed     Code = "METHOD_NOT_ALLOWED"
	ReleaseMismatch      Code = "RELEASE_MISMATCH"
	JoinApprovalRefused  Code = "JOIN_APPROVAL_REFUSED"
	Conflict             Code = "CONFLICT"
	PayloadTooLarge      Code = "PAYLOAD_TOO_LARGE"
	RangeNotSatisfiable  Code = "RANGE_NOT_SATISFIABLE"
	TooManyRequests      Code = "TOO_MANY_REQUESTS"
	UnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	Internal             Code = "INTERNAL"
	NotImplemented       Code = "NOT_IMPLEMENTED"
	ReleaseBusy          Code = "RELEASE_BUSY"
	ReleaseCorrupt       Code = "RELEASE_CORRUPT"
	Unavailable          Code = "UNAVAILABLE"
	// OpenBaoRootToken: the founder's OpenBao token is a root token (or
	// lacks the stratum-cp policy); no bundle carries it (SPEC 19).
	OpenBaoRootToken Code = "OPENBAO_ROOT_TOKEN"
)

// FieldError is one field's problem; Field is its path (e.g.
// "networks.storage.ip"), empty for the whole request.
type FieldError = strictjson.Problem

// Issue is one finding of a rejected policy document.
type Issue struct {
	Code      string `json:"code"`
	Statement int    `json:"statement"`
	Action    string `json:"action,omitempty"`
}

// Error is the error every domain package returns for a refusal.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Fields  []FieldError   `json:"fields,omitempty"`
	Issues  []Issue        `json:"issues,omitempty"`
	Details map[string]any `json:"details,omitempty"`
	// RetryAfter, in seconds, for codes that tell the client when to retry.
	RetryAfter int `json:"-"`
}

// Error names the code, the message and each field problem; field
// messages never quote the values they judge, so this is safe to log.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Code, e.Message)
	for i, f := range e.Fields {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s: %s", sep, f.Field, f.Message)
	}
	return b.String()
}

// New returns an error with code and message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithFields returns an error carrying field problems.
func WithFields(code Code, message string, fields []FieldError) *Error {
	return &Error{Code: code, Message: message, Fields: fields}
}

// As returns the *Error in err's chain, if any. A strict decoder's
// problems (a *strictjson.Error, which knows no HTTP) are INVALID_INPUT
// with each problem as a field.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	var se *strictjson.Error
	if errors.As(err, &se) {
		return WithFields(InvalidInput, se.Message, se.Problems), true
	}
	return nil, false
}

// CodeOf returns err's code, or Internal for an error that is not ours.
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return Internal
}

// Fields collects field problems so a validation reports all of them.
type Fields []FieldError

// Add records a problem at field.
func (f *Fields) Add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns an INVALID_INPUT error when problems were recorded, else nil.
func (f Fields) Err(message string) error {
	if len(f) == 0 {
		return nil
	}
	return WithFields(InvalidInput, message, f)
}
