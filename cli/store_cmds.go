package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"stratum/founder"
	"stratum/store"
)

func init() {
	Register(Command{Name: "backup", Summary: "write a consistent zstd snapshot of the store (works while serving)", Run: runBackup})
	Register(Command{Name: "restore", Summary: "restore a snapshot into an empty data directory", Run: runRestore})
	Register(Command{Name: "audit", Summary: "audit verify: check the audit hash chain", Run: runAudit})
}

func runBackup(ctx context.Context, args []string) error {
	fs := newFlagSet("backup")
	data := fs.String("data", "./data", "data directory")
	out := fs.String("out", "", "snapshot file to write (.zst)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out FILE is required")
	}
	d := founder.DataDir(*data)
	// A running founder holds the store's lock: ask it over its local
	// socket, whose file mode is the authorization.
	if n, err := backupViaSocket(ctx, d.ControlSocket(), *out); err == nil {
		fmt.Printf("backup of the running founder written to %s (%d bytes of store)\n", *out, n)
		return nil
	} else if !errors.Is(err, errNoFounder) {
		return err
	}
	n, err := store.BackupFile(d.DB(), *out)
	if err != nil {
		return err
	}
	fmt.Printf("backup written to %s (%d bytes of store)\n", *out, n)
	return nil
}

var errNoFounder = errors.New("no running founder")

func backupViaSocket(ctx context.Context, sock, out string) (int64, error) {
	if _, err := os.Stat(sock); err != nil {
		return 0, errNoFounder
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://founder/backup", nil)
	resp, err := client.Do(req)
	if err != nil {
		return 0, errNoFounder
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("the founder refused the backup: %s", resp.Status)
	}
	tmp := out + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.Trailer.Get("X-Backup-Error") != "" {
		err = errors.New("backup failed on the founder: " + resp.Trailer.Get("X-Backup-Error"))
	}
	if err != nil {
		os.Remove(tmp)
		return n, err
	}
	return n, os.Rename(tmp, out)
}

func runRestore(_ context.Context, args []string) error {
	fs := newFlagSet("restore")
	data := fs.String("data", "./data", "data directory to restore into (its data.key must be the original's)")
	in := fs.String("in", "", "snapshot file (.zst)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" {
		return errors.New("--in FILE is required")
	}
	d := founder.DataDir(*data)
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	n, err := store.Restore(*in, d.DB())
	if err != nil {
		return err
	}
	fmt.Printf("restored %d bytes into %s; put the original data.key, ca.pem and releases/ beside it\n", n, d.DB())
	return nil
}

func runAudit(_ context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return errors.New("usage: stratum audit verify --data DIR")
	}
	fs := newFlagSet("audit verify")
	data := fs.String("data", "./data", "data directory")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	d := founder.DataDir(*data)
	if msg, ok, err := auditViaSocket(d.ControlSocket()); ok {
		if err != nil {
			return &ExitError{Code: 3, Err: err}
		}
		fmt.Print(msg)
		return nil
	}
	db, err := store.OpenReadOnly(d.DB())
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := db.VerifyAudit()
	if err != nil {
		return &ExitError{Code: 3, Err: fmt.Errorf("audit chain broken after %d good events: %w", n, err)}
	}
	fmt.Printf("audit chain intact: %d events\n", n)
	return nil
}

// auditViaSocket asks a running founder to verify its chain; ok is false
// when no founder answers.
func auditViaSocket(sock string) (string, bool, error) {
	if _, err := os.Stat(sock); err != nil {
		return "", false, nil
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", sock)
	}}}
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
