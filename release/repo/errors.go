package repo

import (
	"errors"
	"fmt"

	"stratum/apierr"
)

// IOError is a failure of the founder's own disk (full, read-only, gone)
// while importing: not the release's fault, so not reported as a bad file.
// The HTTP layer answers it as INTERNAL and logs it.
type IOError struct {
	Op  string
	Err error
}

func (e *IOError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *IOError) Unwrap() error { return e.Err }

func ioError(op string, err error) error { return &IOError{Op: op, Err: err} }

func isIOError(err error) bool {
	var e *IOError
	return errors.As(err, &e)
}

func notFound(release, path string) *apierr.Error {
	return apierr.New(apierr.NotFound, "release %q has no file %q", release, path)
}

func corruptError(release, path string) *apierr.Error {
	return apierr.New(apierr.ReleaseCorrupt,
		"file %s of release %s failed verification on the founder; an operator must re-import the release", path, release)
}

func shuttingDown() *apierr.Error {
	return apierr.New(apierr.Unavailable, "the founder is shutting down")
}

func damagedIndex(release, path string) error {
	return fmt.Errorf("release %s: chunk index of %s is damaged", release, path)
}
