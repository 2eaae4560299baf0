package founder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/join"
	"stratum/openbao"
	"stratum/store"
)

// openBaoRenewEvery is how often the founder renews its periodic token,
// well inside openbao.FounderPeriod.
const openBaoRenewEvery = time.Hour

// maxTokenFile bounds a token file: a token is a few hundred bytes.
const maxTokenFile = 64 << 10

// openBaoSetup reads the cluster's OpenBao settings (the cluster file's,
// overridden by serve's flags) and, when one is configured, makes the
// founder's side of it. It says once, at start, what it found: no
// OpenBao, or whether its token passes the root-token rule.
func (f *Founder) openBaoSetup(ctx context.Context) error {
	var stored openbao.Settings
	if err := f.db.View(func(tx *store.Tx) error {
		var err error
		stored, err = cluster.LoadOpenBao(tx)
		return err
	}); err != nil {
		return err
	}
	s := stored.Merge(f.opts.OpenBao)
	if !s.Configured() {
		f.openBaoLine = "none configured: bundles carry no openBaoToken or openBaoNodeToken"
		f.log.Info("no OpenBao is configured (openbao.addr, --openbao-addr): bundles carry no openBaoToken or openBaoNodeToken")
		return nil
	}
	var err error
	if f.openBao, err = openbao.New(openbao.Config{Settings: s, Token: func() (string, error) { return f.openBaoToken(s.TokenFile) }}); err != nil {
		return err
	}
	f.openBaoAddr = s.Addr
	if f.isolated() {
		f.openBaoLine = s.Addr + " (not contacted while this restored founder is isolated)"
		f.log.Warn("OpenBao: not contacted while this restored founder is isolated", "addr", s.Addr)
		return nil
	}
	f.openBaoLine = f.checkOpenBao(ctx)
	return nil
}

// checkOpenBao looks the founder's token up once and logs what it found,
// at start and when an isolated founder is taken over; it returns the
// banner's line.
func (f *Founder) checkOpenBao(ctx context.Context) string {
	// Bounded: an unreachable OpenBao must not hold the listeners back.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := f.openBao.FounderToken(cctx); err != nil {
		f.log.Warn("OpenBao: control-plane deliveries wait until this is fixed", "addr", f.openBaoAddr, "reason", err.Error())
		return f.openBaoAddr + " (deliveries wait: " + err.Error() + ")"
	}
	f.log.Info("OpenBao: the founder's token passes the root-token rule", "addr", f.openBaoAddr)
	return f.openBaoAddr + " (founder token has " + openbao.PolicyControlPlane + ")"
}

// openBaoToken is the founder's token: the one a converge stored, else
// the token file's (read each time, so a rotated file is seen).
func (f *Founder) openBaoToken(tokenFile string) (string, error) {
	var tok string
	var found bool
	if err := f.db.View(func(tx *store.Tx) error {
		var err error
		tok, found, err = cluster.LoadOpenBaoToken(tx)
		return err
	}); err != nil {
		return "", err
	}
	if found {
		return tok, nil
	}
	if tokenFile == "" {
		return "", errors.New("no token file (openbao.tokenFile) and no converged token")
	}
	b, err := crypto.ReadFileLimit(tokenFile, maxTokenFile)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// joinOpenBao is the join service's OpenBao; nil (no interface value
// holding a nil pointer) when none is configured. Every call is refused
// while the founder is isolated.
func (f *Founder) joinOpenBao() join.OpenBao {
	if f.openBao == nil {
		return nil
	}
	return isolatedOpenBao{f}
}

// isolatedOpenBao is the founder's OpenBao for the join service: the
// same, except that nothing is sent while the founder is isolated (the
// join queue's loop skips its turns then; this holds for any other way
// in).
type isolatedOpenBao struct{ f *Founder }

var errIsolatedOpenBao = apierr.New(apierr.Unavailable, "this restored founder is isolated: it contacts no OpenBao until `stratum takeover`")

func (b isolatedOpenBao) FounderToken(ctx context.Context) (string, error) {
	if b.f.isolated() {
		return "", errIsolatedOpenBao
	}
	return b.f.openBao.FounderToken(ctx)
}

func (b isolatedOpenBao) MintNodeToken(ctx context.Context, founderToken, nodeID string) (openbao.Token, error) {
	if b.f.isolated() {
		return openbao.Token{}, errIsolatedOpenBao
	}
	return b.f.openBao.MintNodeToken(ctx, founderToken, nodeID)
}

func (b isolatedOpenBao) Revoke(ctx context.Context, accessor string) error {
	if b.f.isolated() {
		return errIsolatedOpenBao
	}
	return b.f.openBao.Revoke(ctx, accessor)
}

// renewOpenBao keeps the founder's periodic token alive.
func (f *Founder) renewOpenBao(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := f.openBao.Renew(cctx); err != nil {
		f.log.Warn("OpenBao: renewing the founder's token failed", "err", err.Error())
	}
}

// controlConverge runs `stratum openbao converge` in the founder: the
// body is the root token. It writes the policies, creates the founder's
// scoped token, stores it sealed and forgets the root token (it lives in
// this request only). The join queue is then tried again.
func (f *Founder) controlConverge(w http.ResponseWriter, r *http.Request) {
	if f.openBao == nil {
		http.Error(w, "no OpenBao is configured: give the cluster file's openbao.addr or serve --openbao-addr", http.StatusConflict)
		return
	}
	if f.isolated() {
		http.Error(w, "this restored founder is isolated: it contacts no OpenBao until `stratum takeover` (docs/restore-drill.md)", http.StatusConflict)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTokenFile))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	root := strings.TrimSpace(string(body))
	if root == "" {
		http.Error(w, "the root token file is empty", http.StatusBadRequest)
		return
	}
	tok, err := openbao.Converge(r.Context(), f.openBao.Client, root)
	root = ""
	if err != nil {
		http.Error(w, "converge failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	err = f.db.Update(func(tx *store.Tx) error {
		if err := cluster.StoreOpenBaoToken(tx, tok.Token); err != nil {
			return err
		}
		return tx.Audit("openbao.converged", "control-socket", tok.Accessor, map[string]string{"policies": strings.Join(tok.Policies, " ")})
	})
	if err != nil {
		http.Error(w, "storing the new token failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	f.joins.Kick()
	f.log.Info("OpenBao: converged; the founder now acts with a periodic stratum-cp token", "accessor", tok.Accessor)
	fmt.Fprintf(w, "converged: policies %s and %s written; the founder's token is a periodic %s token (accessor %s), stored sealed; the root token was not kept\n",
		openbao.PolicyControlPlane, openbao.PolicyNode, openbao.PolicyControlPlane, tok.Accessor)
}
