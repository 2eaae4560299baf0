package founder

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// bootstrapPasswordChanged removes bootstrap-credentials.txt once the
// bootstrap admin's password has changed: the file would otherwise keep
// a password that no longer signs in, and point every reader (the
// banner, the console's sign-in page) to it.
func (f *Founder) bootstrapPasswordChanged(email string) {
	if !strings.EqualFold(email, f.id.AdminEmail) {
		return
	}
	path := f.opts.Data.Credentials()
	switch err := os.Remove(path); {
	case err == nil:
		f.log.Info("the bootstrap admin's password changed: removed its generated password", "file", path)
	case !errors.Is(err, fs.ErrNotExist):
		f.log.Error("the bootstrap admin's password changed, but the file with the old one could not be removed: remove it by hand", "file", path, "err", err)
	}
}

// hasBootstrapCredentials: the bootstrap admin's generated password is
// still on disk (the console's sign-in page says where).
func (f *Founder) hasBootstrapCredentials() bool {
	_, err := os.Stat(f.opts.Data.Credentials())
	return err == nil
}
