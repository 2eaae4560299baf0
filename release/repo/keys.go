package repo

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/release"
	"stratum/store"
	"stratum/wire"
)

// Trusted release keys (SPEC 16.2). A key file in the keys directory
// (DIR/release-keys/NAME.pub) counts only while its key has a record in
// bucketKeys, which carries a MAC: a file dropped there by whoever can
// write the data directory, or a record forged in the store, trusts
// nothing. The files present when a founder of this build first starts
// (or first imports offline) are adopted once; after that a key is
// trusted through TrustKey (stratum release trust-key).

// trustedKey is the record that makes a key file count.
type trustedKey struct {
	KeyID     string    `json:"keyId"`
	File      string    `json:"file"` // NAME.pub, as first trusted
	TrustedAt time.Time `json:"trustedAt"`
	TrustedBy string    `json:"trustedBy"`
}

// keysAdoptedMark is the key of bucketKeys' record saying adoption
// happened (a key id is 64 hex digits, never this).
const keysAdoptedMark = "adopted"

// adoptionActor is who trusted the keys adoption found.
const adoptionActor = "adoption"

// untrustedNote says that f is not trusted and how to trust it.
func untrustedNote(f release.KeyFile) string {
	return fmt.Sprintf("%s holds key %s but is not trusted (a key file counts once trusted): trust it with `stratum release trust-key %s` (add --data DIR on a stopped founder)",
		f.Path, f.ID, f.Path)
}

// keyring loads the trusted keys: the key files whose key has a valid
// record. Each file that has none is logged and audited (once per key in
// this process) and named in the failure of a release it signed.
func (s *Service) keyring() (*release.Keyring, error) {
	if s.cfg.Keys != nil {
		return s.cfg.Keys, nil
	}
	dir := s.cfg.KeysDir
	files, err := release.ReadKeyFiles(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, apierr.New(apierr.Conflict, "the founder trusts no release key yet (%s does not exist): trust the key that signed the release with stratum release trust-key NAME.pub", dir)
	} else if err != nil {
		return nil, apierr.New(apierr.Conflict, "the founder's release keys (%s) cannot be loaded: %v", dir, err)
	}
	for _, f := range files {
		if f.Err != nil {
			return nil, apierr.New(apierr.Conflict, "the founder's release keys (%s) cannot be loaded: %v", dir, f.Err)
		}
	}
	var trusted []ed25519.PublicKey
	var untrusted []release.KeyFile
	err = s.cfg.DB.View(func(tx *store.Tx) error {
		for _, f := range files {
			if bucketKeys.Has(tx, f.ID) {
				trusted = append(trusted, f.Pub)
			} else {
				untrusted = append(untrusted, f)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var notes []string
	for _, f := range untrusted {
		s.reportUntrusted(f)
		notes = append(notes, untrustedNote(f))
	}
	if len(files) == 0 {
		return nil, apierr.New(apierr.Conflict, "the founder trusts no release key yet (no *.pub file in %s): trust the key that signed the release with stratum release trust-key NAME.pub", dir)
	}
	if len(trusted) == 0 {
		return nil, apierr.New(apierr.Conflict, "the founder's release keys: no trusted key in %s: %s", dir, strings.Join(notes, "; "))
	}
	keys, err := release.NewKeyring(s.cfg.Threshold, trusted...)
	if err != nil {
		msg := fmt.Sprintf("the founder's release keys (%s) cannot be loaded: %v", dir, err)
		if len(notes) > 0 {
			msg += "; " + strings.Join(notes, "; ")
		}
		return nil, apierr.New(apierr.Conflict, "%s", msg)
	}
	for _, f := range untrusted {
		keys.Note(f.ID, untrustedNote(f))
	}
	return keys, nil
}

// reportUntrusted logs and audits, once per key in this process, a key
// file that is not trusted.
func (s *Service) reportUntrusted(f release.KeyFile) {
	if _, seen := s.untrusted.LoadOrStore(f.ID, true); seen {
		return
	}
	s.cfg.Log.Warn("a release key file is not trusted: releases it signs are refused", "file", f.Path, "keyId", f.ID,
		"trust", "stratum release trust-key "+f.Path)
	err := s.cfg.DB.Update(func(tx *store.Tx) error {
		return tx.Audit("release.key.untrusted", "stratum", f.ID, map[string]string{"keyId": f.ID, "file": f.Name})
	})
	if err != nil {
		s.cfg.Log.Error("auditing an untrusted release key file failed", "file", f.Path, "err", err)
	}
}

// AdoptKeys trusts, once per store, every key file then in the keys
// directory: the first start of a founder of this build (or its first
// offline import) on a data directory whose keys were plain files. The
// adoption is audited (release.keys.adopted) and marked; a file added
// after it counts only once trusted (TrustKey).
func (s *Service) AdoptKeys() error {
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	files, err := s.adoptable()
	if err != nil {
		return err
	}
	before, err := s.adoptedBefore()
	if err != nil {
		return err
	}
	return s.cfg.DB.Update(func(tx *store.Tx) error { return adoptKeys(tx, files, time.Now().UTC(), before) })
}

// adoptedEvent is the audit event of an adoption.
const adoptedEvent = "release.keys.adopted"

// adoptedBefore reports, for a store whose bucketKeys holds neither the
// mark nor any record, whether its audit chain records an adoption: the
// bucket emptied by hand (the bbolt file edited) must not have the files
// found now adopted. The chain is read only then: at the first start of
// this build, or after such an edit. Its links are checked first: a
// chain that does not verify (the adoption's event deleted with the
// bucket) proves no absence, and counts as an adoption.
func (s *Service) adoptedBefore() (bool, error) {
	empty := true
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		return bucketKeys.Keys(tx, func(string) error { empty = false; return errStopKeys })
	})
	if err != nil && !errors.Is(err, errStopKeys) {
		return false, err
	}
	if !empty {
		return false, nil
	}
	if _, err := s.cfg.DB.VerifyAuditChain(); err != nil {
		s.cfg.Log.Warn("the release keys have no records and the audit chain does not verify, so it cannot show they were never adopted: nothing is adopted; trust each key with stratum release trust-key",
			"keysDir", s.cfg.KeysDir, "err", err)
		return true, nil
	}
	const page = 1000
	var after uint64
	for {
		evs, err := s.cfg.DB.AuditEvents(after, page)
		if err != nil {
			return false, err
		}
		for _, ev := range evs {
			if ev.Kind == adoptedEvent {
				s.cfg.Log.Warn("the release keys were adopted before (audit event "+strconv.FormatUint(ev.Seq, 10)+") yet their records are gone: nothing is adopted again; trust each key with stratum release trust-key",
					"keysDir", s.cfg.KeysDir)
				return true, nil
			}
		}
		if len(evs) < page {
			return false, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

var errStopKeys = errors.New("stop")

// adoptable reads the key files adoption would trust; a file that holds
// no key is logged and left out (an import names it).
func (s *Service) adoptable() ([]release.KeyFile, error) {
	files, err := release.ReadKeyFiles(s.cfg.KeysDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, ioError("read the release keys directory", err)
	}
	keys := files[:0]
	for _, f := range files {
		if f.Err != nil {
			s.cfg.Log.Warn("a file in the release keys holds no key", "err", f.Err)
			continue
		}
		keys = append(keys, f)
	}
	return keys, nil
}

// adoptKeys is AdoptKeys in tx: nothing once the mark is there. A
// trusted-key record without the mark, or an adoption the audit records
// (before), means adoption (or a trust) happened and the mark was lost:
// the mark is put back, nothing adopted.
func adoptKeys(tx *store.Tx, files []release.KeyFile, now time.Time, before bool) error {
	if bucketKeys.Has(tx, keysAdoptedMark) {
		return nil
	}
	mark := trustedKey{TrustedAt: now, TrustedBy: adoptionActor}
	if err := bucketKeys.Keys(tx, func(string) error { return errStopKeys }); errors.Is(err, errStopKeys) || before {
		return bucketKeys.Put(tx, keysAdoptedMark, mark)
	} else if err != nil {
		return err
	}
	var ids, names []string
	for _, f := range files {
		if bucketKeys.Has(tx, f.ID) {
			continue // the same key in two files
		}
		if err := bucketKeys.Put(tx, f.ID, trustedKey{KeyID: f.ID, File: f.Name, TrustedAt: now, TrustedBy: adoptionActor}); err != nil {
			return err
		}
		ids, names = append(ids, f.ID), append(names, f.Name)
	}
	if err := bucketKeys.Put(tx, keysAdoptedMark, mark); err != nil {
		return err
	}
	return tx.Audit(adoptedEvent, "stratum", "release-keys", map[string]string{
		"keyIds": strings.Join(ids, ","), "files": strings.Join(names, ","),
	})
}

// maxKeyName bounds a key file's name.
const maxKeyName = 128

// checkKeyName refuses a name that is not a plain NAME.pub file name.
func checkKeyName(name string) error {
	bad := func(why string) error {
		return apierr.WithFields(apierr.InvalidInput, "the key file's name "+why, []apierr.FieldError{{Field: "name", Message: why}})
	}
	switch {
	case len(name) > maxKeyName:
		return bad(fmt.Sprintf("is longer than %d bytes", maxKeyName))
	case !strings.HasSuffix(name, ".pub") || len(name) == len(".pub"):
		return bad("must be NAME.pub")
	case strings.HasPrefix(name, "."):
		return bad("must not start with a dot")
	case strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
	}):
		return bad("may hold only letters, digits, '.', '-' and '_'")
	}
	return nil
}

// TrustKey trusts the release public key publicKey (PEM) as the file
// name (NAME.pub; empty: the key id's first 16 digits) in the keys
// directory: it writes the file (0644; a different key already under
// that name is refused), records the key and audits release.key.trusted.
// A data directory not yet adopted is adopted first, so its other files
// keep counting.
func (s *Service) TrustKey(name string, publicKey []byte, actor string) (wire.ReleaseKey, error) {
	pub, err := release.ParsePublicKey(publicKey)
	if err != nil {
		return wire.ReleaseKey{}, apierr.WithFields(apierr.InvalidInput, "the public key is not a release public key: "+err.Error(),
			[]apierr.FieldError{{Field: "publicKey", Message: err.Error()}})
	}
	id := release.KeyID(pub)
	if name == "" {
		name = id[:16] + ".pub"
	}
	if err := checkKeyName(name); err != nil {
		return wire.ReleaseKey{}, err
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	files, err := s.adoptable()
	if err != nil {
		return wire.ReleaseKey{}, err
	}
	before, err := s.adoptedBefore()
	if err != nil {
		return wire.ReleaseKey{}, err
	}
	if err := writeKeyFile(s.cfg.KeysDir, name, pub, publicKey); err != nil {
		return wire.ReleaseKey{}, err
	}
	err = s.cfg.DB.Update(func(tx *store.Tx) error {
		now := time.Now().UTC()
		if err := adoptKeys(tx, files, now, before); err != nil {
			return err
		}
		if err := bucketKeys.Put(tx, id, trustedKey{KeyID: id, File: name, TrustedAt: now, TrustedBy: actor}); err != nil {
			return err
		}
		return tx.Audit("release.key.trusted", actor, id, map[string]string{"keyId": id, "file": name})
	})
	if err != nil {
		return wire.ReleaseKey{}, err
	}
	s.untrusted.Delete(id)
	return wire.ReleaseKey{File: name, KeyID: id, Trusted: true}, nil
}

// writeKeyFile writes pemText (holding pub) as dir/name, unless that
// file holds it already; a file there holding anything else is refused.
func writeKeyFile(dir, name string, pub ed25519.PublicKey, pemText []byte) error {
	path := filepath.Join(dir, name)
	if have, err := release.LoadPublicKey(path); err == nil {
		if bytes.Equal(have, pub) {
			return nil
		}
		return apierr.New(apierr.Conflict, "%s holds another key (%s): choose another name", path, release.KeyID(have))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return apierr.New(apierr.Conflict, "%s exists and is not this key (%v): choose another name", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ioError("create the release keys directory", err)
	}
	if err := crypto.WriteFileAtomic(path, pemText, 0o644); err != nil {
		return ioError("write "+path, err)
	}
	return nil
}

// ListKeys lists every *.pub file of the keys directory with its key id
// and whether it is trusted (a file that holds no key: why, in Problem).
func (s *Service) ListKeys() ([]wire.ReleaseKey, error) {
	files, err := release.ReadKeyFiles(s.cfg.KeysDir)
	if errors.Is(err, fs.ErrNotExist) {
		return []wire.ReleaseKey{}, nil
	} else if err != nil {
		return nil, ioError("read the release keys directory", err)
	}
	out := make([]wire.ReleaseKey, 0, len(files))
	err = s.cfg.DB.View(func(tx *store.Tx) error {
		for _, f := range files {
			k := wire.ReleaseKey{File: f.Name, KeyID: f.ID}
			if f.Err != nil {
				k.Problem = f.Err.Error()
			} else {
				k.Trusted = bucketKeys.Has(tx, f.ID)
			}
			out = append(out, k)
		}
		return nil
	})
	return out, err
}
