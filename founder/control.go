package founder

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"stratum/store"
	"stratum/strictjson"
)

// serveControl listens on DIR/control.sock (mode 0600: only the founder's
// user may connect) for the local operations that need the open store:
// a live backup, an audit check, the OpenBao converge and the take-over
// of a restored founder.
func (f *Founder) serveControl() (func(), error) {
	path := f.opts.Data.ControlSocket()
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", f.controlBackup)
	mux.HandleFunc("POST /openbao/converge", f.controlConverge)
	mux.HandleFunc("POST /takeover", f.controlTakeOver)
	mux.HandleFunc("GET /audit/verify", func(w http.ResponseWriter, r *http.Request) {
		n, err := f.db.VerifyAudit()
		var rejected *store.RejectedRecordsError
		if err == nil || errors.As(err, &rejected) {
			if markErr := f.checkAuditMarkLive(); markErr != nil {
				err = markErr
			}
		}
		if errors.As(err, &rejected) {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, "audit chain intact: %d events; but %v\n", n, err)
			return
		}
		if err != nil {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, "audit chain broken after %d good events: %v\n", n, err)
			return
		}
		fmt.Fprintf(w, "audit chain intact: %d events\n", n)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close(); os.Remove(path) }, nil
}

// controlBackup streams a snapshot as the BackupRequest body asks: plain,
// or encrypted to its recipients, with the data key the founder holds
// when asked. The key never leaves the process unencrypted.
func (f *Founder) controlBackup(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req BackupRequest
	if err := strictjson.Decode(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	opts, err := req.options(f.dataKey)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Trailer", "X-Backup-Error")
	if _, err := writeBackup(w, f.db, f.opts.Data, opts, req.ExcludeReleases); err != nil {
		f.log.Error("backup failed", "err", err)
		msg := "snapshot failed; see the founder's log"
		if errors.Is(err, store.ErrNoSnapshot) {
			msg = err.Error() // a refusal that says what to use instead
		}
		w.Header().Set("X-Backup-Error", msg)
	}
}
