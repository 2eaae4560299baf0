package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// FileError is a release tree that fails verification: Path names the
// file at fault (empty for the tree as a whole) and Reason says why, so a
// joiner can fetch that one file again and an operator knows what to fix.
// The HTTP layer answers it as INVALID_INPUT with Path as the field.
type FileError struct {
	Release string // the release, when known
	Path    string
	Reason  string
}

func (e *FileError) Error() string {
	msg := e.Reason
	if e.Path != "" {
		msg = fmt.Sprintf("%s: %s", e.Path, e.Reason)
	}
	if e.Release != "" {
		msg = fmt.Sprintf("release %s fails verification: %s", e.Release, msg)
	}
	return msg
}

func badFile(path, release, reason string) error {
	return &FileError{Release: release, Path: path, Reason: reason}
}

// BadFile returns the file a verification error names and why.
func BadFile(err error) (path, reason string, ok bool) {
	var fe *FileError
	if !errors.As(err, &fe) {
		return "", "", false
	}
	return fe.Path, fe.Reason, true
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
