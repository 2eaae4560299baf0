package founder

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"stratum/cluster"
	"stratum/crypto"
	"stratum/store"
	"stratum/tpm"
)

// The founder's data key lives in exactly one of two forms:
//
//   - DIR/data.key: the 32 raw bytes, mode 0600 (the first build's form);
//   - DIR/data.key.tpm: the key sealed to the founder's TPM under a PCR
//     policy (the tpm package's blob, the joiner's format), beside
//     DIR/data.key.recovery: the key encrypted under a key derived from a
//     recovery key that was printed once and is kept nowhere on the machine.
//
// Everything that reads, creates or moves the data key is in this file.

// DataKeyTPM is the data key sealed to the founder's TPM.
func (d DataDir) DataKeyTPM() string { return d.path("data.key.tpm") }

// DataKeyRecovery is the data key encrypted under the recovery key.
func (d DataDir) DataKeyRecovery() string { return d.path("data.key.recovery") }

// keyFiles are every file that holds the data key in some form.
func (d DataDir) keyFiles() []string {
	return []string{d.DataKey(), d.DataKeyTPM(), d.DataKeyRecovery()}
}

// KeySource says where the data key is (to be) kept.
type KeySource struct {
	// TPM is the TPM character device or swtpm socket. Empty means a plain
	// data.key, except that a directory holding data.key.tpm is unsealed
	// with tpm.DefaultPath.
	TPM string
	// PCRs the key is sealed to when it is sealed; empty means
	// tpm.DefaultPCRs.
	PCRs []int
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// LoadDataKey returns the data key of an initialized directory. It reads
// and changes nothing but the TPM's transient state.
func (d DataDir) LoadDataKey(ks KeySource) (*crypto.DataKey, error) {
	plain, err := exists(d.DataKey())
	if err != nil {
		return nil, err
	}
	sealed, err := exists(d.DataKeyTPM())
	if err != nil {
		return nil, err
	}
	tpmPath := ks.TPM
	if tpmPath == "" {
		tpmPath = tpm.DefaultPath
	}
	switch {
	case plain && sealed:
		return nil, fmt.Errorf("both %s and %s exist (an interrupted `stratum tpm convert` or `tpm recover --to-file`): run `stratum tpm convert --data %s --tpm %s` to keep the key in the TPM, or remove %s to keep the file",
			d.DataKey(), d.DataKeyTPM(), shellQuote(string(d)), shellQuote(tpmPath), d.DataKeyTPM())
	case sealed:
		return d.unsealDataKey(tpmPath)
	case plain && ks.TPM != "":
		return nil, fmt.Errorf("the data key of %s is a plain file (%s), not sealed to a TPM: move it into the TPM with `stratum tpm convert --data %s --tpm %s`, or start without --tpm",
			d, d.DataKey(), shellQuote(string(d)), shellQuote(ks.TPM))
	case plain:
		return crypto.LoadOrCreateDataKey(d.DataKey(), false)
	default:
		return nil, fmt.Errorf("no data key in %s: neither %s nor %s exists (the store's secrets cannot be opened without it; restore it from the backup that carried it, or with `stratum tpm recover`)",
			d, d.DataKey(), d.DataKeyTPM())
	}
}

// unsealDataKey asks the TPM for the key. When the TPM is there but will
// not release it, the error says why and gives the recovery command.
func (d DataDir) unsealDataKey(tpmPath string) (*crypto.DataKey, error) {
	raw, err := tpm.UnsealFile(tpmPath, d.DataKeyTPM())
	switch {
	case tpm.NeedsRecovery(err):
		return nil, fmt.Errorf("data key: %w.\nNothing was changed on disk. Recover with the recovery key printed when the key was sealed (it is read from stdin):\n  %s",
			err, d.recoverCommand(tpmPath))
	case errors.Is(err, tpm.ErrNoTPM):
		return nil, fmt.Errorf("the data key is sealed to a TPM (%s), but %w: give --tpm with the founder's TPM; if that TPM is gone for good, write the key back to a file with the recovery key:\n  stratum tpm recover --data %s --to-file --recovery-key -",
			d.DataKeyTPM(), err, shellQuote(absPath(string(d))))
	case err != nil:
		return nil, fmt.Errorf("unseal the data key: %w", err)
	}
	defer clear(raw)
	return crypto.NewDataKey(raw)
}

// recoverCommand is the exact command that reseals the key to this TPM
// under the PCRs it was sealed to (with their current values).
func (d DataDir) recoverCommand(tpmPath string) string {
	cmd := "stratum tpm recover --data " + shellQuote(absPath(string(d))) + " --tpm " + shellQuote(absPath(tpmPath))
	if pcrs, err := tpm.SealedPCRs(d.DataKeyTPM()); err == nil {
		cmd += " --tpm-pcrs " + joinPCRs(pcrs)
	}
	return cmd + " --recovery-key -"
}

func joinPCRs(pcrs []int) string {
	s := make([]string, len(pcrs))
	for i, p := range pcrs {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// absPath makes a path in a printed command work from any directory.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:,@%+=-]+$`)

// shellQuote makes a path safe to paste into a shell.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// OpenStore opens the store with the data key ks finds.
func (d DataDir) OpenStore(ks KeySource) (*store.DB, error) {
	key, err := d.LoadDataKey(ks)
	if err != nil {
		return nil, err
	}
	return store.Open(d.DB(), key, d.schemaFloor(key, false)...)
}

// preparedKey is a new directory's data key in the form it will be
// written: plain, or sealed to a TPM and wrapped for recovery.
type preparedKey struct {
	dk             *crypto.DataKey
	blob, recovery []byte // set when sealed
	recoveryKey    *crypto.RecoveryKey
}

// prepareDataKey seals dk to the TPM in ks, if any (verified by unsealing
// it once), and wraps it under a new recovery key. It touches no file, so
// a missing TPM leaves the directory as it was.
func prepareDataKey(dk *crypto.DataKey, ks KeySource) (*preparedKey, error) {
	if ks.TPM == "" {
		return &preparedKey{dk: dk}, nil
	}
	raw := dk.Bytes()
	defer clear(raw)
	blob, err := tpm.SealVerified(ks.TPM, ks.PCRs, raw)
	if err != nil {
		return nil, fmt.Errorf("seal the data key to the TPM at %s: %w", ks.TPM, err)
	}
	rk, err := crypto.NewRecoveryKey()
	if err != nil {
		return nil, err
	}
	rec, err := crypto.WrapDataKey(dk, rk)
	if err != nil {
		return nil, err
	}
	return &preparedKey{dk: dk, blob: blob, recovery: rec, recoveryKey: rk}, nil
}

// write puts the key into d. A sealed key's recovery file goes down
// before the blob: a sealed key with no way to recover it must never
// exist, even after a crash in between. On failure the files it was
// writing are removed (and only those: convert keeps data.key).
func (p *preparedKey) write(d DataDir) error {
	if p.blob == nil {
		raw := p.dk.Bytes()
		defer clear(raw)
		err := crypto.WriteFileAtomic(d.DataKey(), raw, 0o600)
		if err != nil {
			os.Remove(d.DataKey())
		}
		return err
	}
	err := crypto.WriteFileAtomic(d.DataKeyRecovery(), p.recovery, 0o600)
	if err == nil {
		err = crypto.WriteFileAtomic(d.DataKeyTPM(), p.blob, 0o600)
	}
	if err != nil {
		p.removeSealed(d)
	}
	return err
}

func (p *preparedKey) removeSealed(d DataDir) {
	os.Remove(d.DataKeyTPM())
	os.Remove(d.DataKeyRecovery())
}

// refuseKeyFiles fails when any form of a data key is already in d: a new
// key must never replace one a store may still need.
func (d DataDir) refuseKeyFiles() error {
	for _, p := range d.keyFiles() {
		ok, err := exists(p)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%s exists without a store: remove it or restore the store it belongs to", p)
		}
	}
	return nil
}

func (d DataDir) removeKeyFiles() {
	for _, p := range d.keyFiles() {
		os.Remove(p)
	}
}

// checkSealedCopy unseals the blob as written to disk and compares it with
// dk, so the plain copy is only deleted once the TPM is known to give
// back exactly this key from exactly this file.
func (d DataDir) checkSealedCopy(tpmPath string, dk *crypto.DataKey) error {
	back, err := d.unsealDataKey(tpmPath)
	if err != nil {
		return fmt.Errorf("the sealed copy does not unseal: %w", err)
	}
	if !back.Equal(dk) {
		return errors.New("the sealed copy unseals to a different key")
	}
	return nil
}

// wrongKeyError is a store holding a cluster whose records do not verify
// under the data key loaded: another cluster's data.key, or a store from
// elsewhere.
func (d DataDir) wrongKeyError(dsn string) error {
	key := d.DataKey()
	if ok, _ := exists(d.DataKeyTPM()); ok {
		key = d.DataKeyTPM()
	}
	where := d.DB()
	if dsn != "" {
		where = "the database"
	}
	return fmt.Errorf("%s holds a cluster whose records do not verify under the data key in %s: it is not this cluster's data.key (restore the one init wrote, or the one a backup carried with --include-data-key)", where, key)
}

// checkKeyOpensStore: the key about to be sealed opens the directory's
// store (its sealed cluster secrets), so convert never removes the only
// copy of a data.key that is not this store's (SPEC 16.10). A store on a
// database is not in the directory and is not checked here.
func (d DataDir) checkKeyOpensStore(dk *crypto.DataKey) error {
	if !d.Initialized() {
		return nil
	}
	db, err := store.OpenReadOnly(d.DB(), dk)
	if err != nil {
		return fmt.Errorf("cannot check that %s opens %s: %w", d.DataKey(), d.DB(), err)
	}
	defer db.Close()
	err = db.View(func(tx *store.Tx) error {
		_, err := cluster.LoadSecrets(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s does not open the store in %s (%v): it is not this founder's data key", d.DataKey(), d.DB(), err)
	}
	return nil
}

// ConvertToTPM moves a plain data.key into the TPM in ks: seal, write the
// recovery file and the blob, unseal the blob from disk and compare, and
// only then remove data.key. It returns the new recovery key. On any
// failure data.key is untouched and the half-written sealed files are
// removed again.
func (d DataDir) ConvertToTPM(ks KeySource) (*crypto.RecoveryKey, error) {
	if ks.TPM == "" {
		return nil, errors.New("--tpm PATH is required")
	}
	plain, err := exists(d.DataKey())
	if err != nil {
		return nil, err
	}
	if !plain {
		if sealed, _ := exists(d.DataKeyTPM()); sealed {
			return nil, fmt.Errorf("%s has no plain data key to convert: it is already sealed (%s)", d, d.DataKeyTPM())
		}
		return nil, fmt.Errorf("%s holds no data key (%s)", d, d.DataKey())
	}
	dk, err := crypto.LoadOrCreateDataKey(d.DataKey(), false)
	if err != nil {
		return nil, err
	}
	s, err := prepareDataKey(dk, ks)
	if err != nil {
		return nil, err
	}
	undo := func(err error) error {
		s.removeSealed(d)
		return fmt.Errorf("%w (%s is unchanged)", err, d.DataKey())
	}
	if err := s.write(d); err != nil {
		return nil, undo(err)
	}
	if err := d.checkSealedCopy(ks.TPM, dk); err != nil {
		return nil, undo(err)
	}
	if err := d.checkKeyOpensStore(dk); err != nil {
		return nil, undo(err)
	}
	if err := os.Remove(d.DataKey()); err != nil {
		return nil, err
	}
	return s.recoveryKey, nil
}

// RecoverOptions say where a recovered key goes.
type RecoverOptions struct {
	// RecoveryKey as printed (case, spaces and dashes do not matter).
	RecoveryKey string
	// Keys.TPM reseals to that TPM (Keys.PCRs, at their current values);
	// ignored with ToFile.
	Keys KeySource
	// ToFile writes data.key back and removes the sealed files.
	ToFile bool
}

// Recover gets the data key back with the recovery key and reseals it to
// a TPM (the recovery key stays valid: the recovery file is unchanged) or
// writes it back to data.key. A wrong recovery key changes nothing.
func (d DataDir) Recover(o RecoverOptions) error {
	rk, err := crypto.ParseRecoveryKey(o.RecoveryKey)
	if err != nil {
		return err
	}
	if plain, err := exists(d.DataKey()); err != nil || plain {
		if err == nil {
			err = fmt.Errorf("%s exists: this founder's data key is a plain file, there is nothing to recover (to seal it, use `stratum tpm convert`)", d.DataKey())
		}
		return err
	}
	file, err := crypto.ReadFileLimit(d.DataKeyRecovery(), 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist: without it the recovery key cannot recover anything (was the data key ever sealed in %s?)", d.DataKeyRecovery(), d)
	}
	if err != nil {
		return err
	}
	dk, err := crypto.UnwrapDataKey(file, rk)
	if err != nil {
		return fmt.Errorf("%s: %w", d.DataKeyRecovery(), err)
	}
	if o.ToFile {
		raw := dk.Bytes()
		defer clear(raw)
		if err := crypto.WriteFileAtomic(d.DataKey(), raw, 0o600); err != nil {
			return err
		}
		for _, p := range []string{d.DataKeyTPM(), d.DataKeyRecovery()} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	if o.Keys.TPM == "" {
		return errors.New("give --tpm PATH to reseal the key, or --to-file")
	}
	raw := dk.Bytes()
	defer clear(raw)
	blob, err := tpm.SealVerified(o.Keys.TPM, o.Keys.PCRs, raw)
	if err != nil {
		return fmt.Errorf("reseal the data key to the TPM at %s: %w", o.Keys.TPM, err)
	}
	old, err := os.ReadFile(d.DataKeyTPM())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := crypto.WriteFileAtomic(d.DataKeyTPM(), blob, 0o600); err != nil {
		return err
	}
	if err := d.checkSealedCopy(o.Keys.TPM, dk); err != nil {
		if old != nil {
			err = errors.Join(err, crypto.WriteFileAtomic(d.DataKeyTPM(), old, 0o600))
		} else {
			os.Remove(d.DataKeyTPM())
		}
		return err
	}
	return nil
}

// PrintRecoveryKey shows a new recovery key, the one time it exists in
// the clear. It goes to the operator's terminal (Out), never to the log.
func PrintRecoveryKey(w io.Writer, rk *crypto.RecoveryKey) {
	if rk == nil {
		return
	}
	fmt.Fprintf(w, "  recovery key:   %s\n", rk.Reveal())
	fmt.Fprintln(w, "    Shown once and stored nowhere: write it down and keep it away from this machine.")
	fmt.Fprintln(w, "    It recovers the data key when the TPM no longer releases it (`stratum tpm recover`).")
}
