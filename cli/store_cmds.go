package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"stratum/backup"
	"stratum/crypto"
	"stratum/founder"
	"stratum/store"
)

func init() {
	Register(newBackupCmd)
	Register(newRestoreCmd)
	Register(newAuditCmd)
}

func newBackupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "write a complete, authenticated backup: store, ca.pem, release keys and release files (works while serving)",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data", "data directory")
	out := fs.String("out", "", "backup file to write (refused if it exists, unless --force)")
	recipients := fs.StringArray("recipient", nil, "encrypt to this age public key (age1...); repeatable")
	recipientFiles := fs.StringArray("recipients-file", nil, "encrypt to the age public keys in this file, one a line; repeatable")
	includeKey := fs.Bool("include-data-key", false, "put the data key inside the encrypted backup, so a restore needs nothing else (needs a recipient)")
	excludeReleases := fs.Bool("exclude-releases", false, "leave the release files out (a restore lists those releases as missing until they are imported again)")
	force := fs.Bool("force", false, "replace an existing --out file")
	keys := addKeyFlags(fs, "TPM holding a stopped founder's sealed data key (default /dev/tpmrm0)")
	_ = cmd.MarkFlagRequired("out")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := os.Lstat(*out); err == nil && !*force {
			return &ExitError{Code: ExitConflict, Err: fmt.Errorf("%s exists: pass --force to replace it", *out)}
		}
		req := founder.BackupRequest{Recipients: *recipients, IncludeDataKey: *includeKey, ExcludeReleases: *excludeReleases}
		return runBackup(cmd, *data, *out, req, *recipientFiles, keys)
	}
	return cmd
}

func runBackup(cmd *cobra.Command, data, out string, req founder.BackupRequest, recipientFiles []string, keys keyFlags) error {
	ctx := cmd.Context()
	stdout := cmd.OutOrStdout()
	for _, f := range recipientFiles {
		lines, err := backup.ReadRecipientsFile(f)
		if err != nil {
			return err
		}
		req.Recipients = append(req.Recipients, lines...)
	}
	// Check here too, so a bad key is refused before anything runs.
	if _, err := backup.ParseRecipients(req.Recipients); err != nil {
		return err
	}
	if req.IncludeDataKey && len(req.Recipients) == 0 {
		return usageError{backup.ErrDataKeyNeedsRecipients}
	}
	what := "backup"
	if len(req.Recipients) > 0 {
		what = fmt.Sprintf("encrypted backup (%d recipient", len(req.Recipients))
		if len(req.Recipients) > 1 {
			what += "s"
		}
		if req.IncludeDataKey {
			what += ", with the data key"
		}
		what += ")"
	}
	d := founder.DataDir(data)
	// A running founder holds the store's lock: ask it over its local
	// socket, whose file mode is the authorization.
	if n, err := backupViaSocket(ctx, d.ControlSocket(), out, req); err == nil {
		fmt.Fprintf(stdout, "%s of the running founder written to %s (%d bytes)\n", what, out, n)
		return nil
	} else if !errors.Is(err, errNoFounder) {
		return err
	}
	ks, err := keys.source()
	if err != nil {
		return err
	}
	n, err := founder.BackupStopped(d, ks, req, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s written to %s (%d bytes of store)\n", what, out, n)
	return nil
}

var errNoFounder = errors.New("no running founder")

func backupViaSocket(ctx context.Context, sock, out string, breq founder.BackupRequest) (int64, error) {
	if _, err := os.Stat(sock); err != nil {
		return 0, errNoFounder
	}
	client := controlClient(sock, 0)
	body, err := json.Marshal(breq)
	if err != nil {
		return 0, err
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://founder/backup", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, errNoFounder
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("the founder refused the backup: %s", bytes.TrimSpace(msg))
	}
	// OUT.partial is the temp file: the crash harness watches it to know a
	// live backup is streaming.
	var n int64
	err = crypto.WriteFileAtomicAs(out, filepath.Base(out)+".partial", 0o600, func(w io.Writer) error {
		var err error
		if n, err = io.Copy(w, resp.Body); err != nil {
			return err
		}
		if msg := resp.Trailer.Get("X-Backup-Error"); msg != "" {
			return errors.New("backup failed on the founder: " + msg)
		}
		return nil
	})
	return n, err
}

func newRestoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore --in FILE",
		Short: "restore a backup into a data directory without a store (checked before anything is written)",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data", "empty data directory to restore into")
	in := fs.String("in", "", "backup file written by stratum backup")
	identities := fs.StringArray("identity", nil, "age identity file that opens an encrypted backup; repeatable")
	keys := addKeyFlags(fs, "seal a data key carried in the backup to this TPM instead of writing data.key (or the TPM holding the directory's sealed key)")
	caPin := fs.String("ca-pin", "", "the CA pin (sha256:...) of the cluster you mean to restore; nothing is written unless the backup's matches (default: the directory's ca.pem)")
	newCluster := fs.Bool("new-cluster", false, "restore whatever cluster the backup holds, with no --ca-pin and no ca.pem to compare with")
	_ = cmd.MarkFlagRequired("in")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *newCluster && *caPin != "" {
			return usagef("give --ca-pin (the cluster you mean to restore) or --new-cluster (whatever cluster the backup holds), not both")
		}
		return runRestore(cmd.OutOrStdout(), *data, founder.RestoreRequest{In: *in, Identities: *identities, CAPin: *caPin, NewCluster: *newCluster}, keys)
	}
	return cmd
}

func runRestore(stdout io.Writer, data string, req founder.RestoreRequest, keys keyFlags) error {
	ks, err := keys.source()
	if err != nil {
		return err
	}
	req.Keys = ks
	req.Show = func(id, pin string) { fmt.Fprintf(stdout, "backup of cluster %s, CA pin %s\n", id, pin) }
	d := founder.DataDir(data)
	res, err := founder.Restore(d, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %d bytes of store and %d files of %s into %s\n", res.Bytes, res.ReleaseFiles, plural(res.Releases, "release", "releases"), d)
	if res.DataKey {
		where := d.DataKey()
		if ks.TPM != "" {
			where = d.DataKeyTPM() + " (sealed to " + ks.TPM + ")"
		}
		fmt.Fprintf(stdout, "  data key from the backup: %s\n", where)
	}
	fmt.Fprintf(stdout, "  CA pin: %s\n", res.CAPin)
	if _, err := os.Stat(d.AuditHWM()); err == nil {
		fmt.Fprintf(stdout, "  %s holds the audit mark of the founder that ran here: if this backup is older, the first start needs --accept-audit-rollback (once, audited)\n", d.AuditHWM())
	}
	fmt.Fprintf(stdout, "  isolated: its founder starts isolated (no node probed, no OpenBao contacted, no node or joiner answered) until `stratum takeover --data %s`, once you know the old founder is gone (docs/restore-drill.md)\n", d)
	founder.PrintRecoveryKey(stdout, res.RecoveryKey)
	return nil
}

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "the audit chain"}
	verify := &cobra.Command{
		Use:   "verify",
		Short: "check the keyed audit chain and its sealed head (needs the data key, or asks the running founder)",
		Args:  cobra.NoArgs,
	}
	fs := verify.Flags()
	data := fs.String("data", "./data", "data directory")
	keys := addKeyFlags(fs, "TPM holding a stopped founder's sealed data key (default /dev/tpmrm0)")
	dsn := storeFlag(fs)
	verify.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAuditVerify(cmd.OutOrStdout(), *data, *dsn, keys)
	}
	cmd.AddCommand(verify)
	return cmd
}

func runAuditVerify(stdout io.Writer, data, dsn string, keys keyFlags) error {
	d := founder.DataDir(data)
	// A database is read beside its running replicas, not through one.
	if msg, ok, err := auditViaSocket(d.ControlSocket()); ok && dsn == "" {
		if err != nil {
			return &ExitError{Code: ExitTrust, Err: err}
		}
		fmt.Fprint(stdout, msg)
		return nil
	}
	ks, err := keys.source()
	if err != nil {
		return err
	}
	n, err := d.VerifyAudit(ks, dsn)
	// No data key, no store, a database out of reach: an error (exit 1),
	// not a broken chain (exit 4).
	var unread *founder.AuditUnreadError
	if errors.As(err, &unread) {
		return fmt.Errorf("the audit chain was not read: %w", err)
	}
	var rejected *store.RejectedRecordsError
	if errors.As(err, &rejected) {
		return &ExitError{Code: ExitTrust, Err: fmt.Errorf("audit chain intact: %d events; but %w", n, err)}
	}
	if err != nil {
		return &ExitError{Code: ExitTrust, Err: fmt.Errorf("audit chain broken after %d good events: %w", n, err)}
	}
	fmt.Fprintf(stdout, "audit chain intact: %d events\n", n)
	return nil
}

// auditViaSocket asks a running founder to verify its chain; ok is false
// when no founder answers.
func auditViaSocket(sock string) (string, bool, error) {
	if _, err := os.Stat(sock); err != nil {
		return "", false, nil
	}
	client := controlClient(sock, time.Minute)
	resp, err := client.Get("http://founder/audit/verify")
	if err != nil {
		return "", false, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return "", true, errors.New(string(b))
	}
	return string(b), true, nil
}
