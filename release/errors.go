package release

import (
	"encoding/json"
	"fmt"
	"slices"

	"stratum/apierr"
)

// badFile is the error for a release that fails verification: an
// INVALID_INPUT whose message names the file and why, and whose one field
// entry carries the same (Field is the file's path), so the joiner can
// fetch that file again without parsing text.
func badFile(path, release, reason string) *apierr.Error {
	msg := fmt.Sprintf("%s: %s", path, reason)
	if release != "" {
		msg = fmt.Sprintf("release %s fails verification: %s", release, msg)
	}
	return &apierr.Error{
		Code:    apierr.InvalidInput,
		Message: msg,
		Fields:  []apierr.FieldError{{Field: path, Message: reason}},
	}
}

// BadFile returns the file a verification error names and why.
func BadFile(err error) (path, reason string, ok bool) {
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.InvalidInput || len(e.Fields) != 1 {
		return "", "", false
	}
	return e.Fields[0].Field, e.Fields[0].Message, true
}

func marshalIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
