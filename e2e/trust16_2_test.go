package e2e

// SPEC 16.2: authenticated state. Rows written by someone holding the
// database password, or bytes put in the bbolt file, grant nothing.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"

	"stratum/crypto"
	"stratum/iam"
	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
	"stratum/store"
	"stratum/wire"
)

// forgedRow is a row an intruder writes straight into the store.
type forgedRow struct{ bucket, key, value string }

// forgeRows writes rows without the data key: into the bbolt file of a
// stopped founder, or into PostgreSQL with a plain INSERT as the DSN's
// user while the founder runs.
func forgeRows(t *testing.T, dir, dsn string, rows []forgedRow) {
	t.Helper()
	if dsn == "" {
		boltEdit(t, dir, func(tx *bolt.Tx) error {
			for _, r := range rows {
				b, err := tx.CreateBucketIfNotExists([]byte(r.bucket))
				if err != nil {
					return err
				}
				if err := b.Put([]byte(r.key), []byte(r.value)); err != nil {
					return err
				}
			}
			return nil
		})
		return
	}
	for _, r := range rows {
		pgExec(t, dsn, "INSERT INTO stratum_kv (bucket, key, value) VALUES ($1, $2, $3)", r.bucket, []byte(r.key), []byte(r.value))
	}
}

// pgExec runs one statement on dsn as its user (the database neighbour's
// plain SQL).
func pgExec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestTrust16_2_ForgedRecordsGrantNothing: an API token row with a */*
// policy and the hash of a secret of the intruder's choice, a join token
// row likewise, and a member row are written into the store without the
// data key. The bearer gets 401, the join token is refused as unknown,
// the member is not listed; each is audited, counted in the metric, and
// named by `stratum audit verify`.
func TestTrust16_2_ForgedRecordsGrantNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, dir, dsn, email, password := o.f, o.dir, o.dsn, o.email, o.password
		admin := f.Login(t, email, password).Token

		now := time.Now().UTC()
		bearer := "sat1.tok-forged01.chosen-secret-of-the-intruder"
		apiToken := forgedAPIToken("tok-forged01", email, bearer, now)
		joinToken := "sjt1.jt-forged01.chosen-join-secret"
		joinRec, _ := json.Marshal(map[string]any{
			"tokenId": "jt-forged01", "hash": crypto.HashToken(joinToken), "role": "control-plane",
			"uses": 100, "usesLeft": 100, "createdBy": email, "createdAt": now, "expiresAt": now.Add(time.Hour),
		})
		member, _ := json.Marshal(map[string]any{"nodeId": "n-forged01", "role": "control-plane", "state": "active", "mgmtIp": "192.0.2.99", "order": 9})
		rows := []forgedRow{{"iam-tokens", "tok-forged01", string(apiToken)}, {"join-tokens", "jt-forged01", string(joinRec)}, {"members", "n-forged01", string(member)}}

		// An unknown join token's answer, to compare the forged one with.
		j := newJoinerClient(t, f.Dir+"/ca.pem")
		register := func(token string) (int, []byte) {
			return j.do(t, "POST", "https://"+f.Join+"/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "hostname": "forged-1", "mgmtIp": "192.0.2.98"})
		}
		unknownStatus, unknownBody := register("sjt1.jt-nosuch01.whatever")
		if unknownStatus == 201 {
			t.Fatalf("an unknown join token registered: %s", unknownBody)
		}

		if dsn == "" {
			f.Stop(os.Interrupt, 20*time.Second)
			forgeRows(t, dir, dsn, rows)
			f = stratumtest.ServeDev(t, dir, serveStore(dsn)...)
			admin = f.Login(t, email, password).Token
			j = newJoinerClient(t, f.Dir+"/ca.pem")
		} else {
			forgeRows(t, dir, dsn, rows)
		}

		// The forged bearer: 401 on every door it tries.
		for _, path := range []string{"/v1/admin/audit", "/v1/admin/cluster/members", "/v1/iam/tokens"} {
			if status, body, err := call(f, "GET", path, bearer, nil); err != nil || status != 401 {
				t.Errorf("GET %s with the forged token: %d %s %v, want 401", path, status, body, err)
			}
		}
		// The forged join token is refused as an unknown one.
		if status, body := register(joinToken); status != unknownStatus {
			t.Errorf("register with the forged join token: %d %s, want %d as for an unknown token", status, body, unknownStatus)
		}
		// The forged member is not a member.
		status, body, err := call(f, "GET", "/v1/admin/cluster/members", admin, nil)
		if err != nil || status != 200 || !strings.Contains(string(body), nodeID(t, f, admin)) {
			t.Fatalf("members: %d %s %v", status, body, err)
		}
		if strings.Contains(string(body), "n-forged01") {
			t.Errorf("the forged member is listed: %s", body)
		}

		// Audited once each, counted in the metric.
		want := []string{"iam-tokens/tok-forged01", "join-tokens/jt-forged01", "members/n-forged01"}
		var subjects []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			subjects = rejectedSubjects(t, f, admin)
			if len(subjects) >= len(want) {
				break
			}
		}
		for _, w := range want {
			n := 0
			for _, s := range subjects {
				if s == w {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s audited %d times, want once (events for %v)", w, n, subjects)
			}
		}
		if n := rejectedMetric(t, f); n < float64(len(want)) {
			t.Errorf("stratum_store_records_rejected_total = %v, want >= %d", n, len(want))
		}

		// audit verify names every forged record.
		args := []string{"audit", "verify", "--data", dir}
		if dsn != "" {
			args = append(args, "--store", dsn)
		}
		r := stratum(t, args...)
		out := r.stdout + r.stderr
		if r.code != 4 { // a trust failure
			t.Errorf("audit verify of a store holding forged records exits %d, want 4: %q", r.code, out)
		}
		for _, k := range []string{`iam-tokens/"tok-forged01"`, `join-tokens/"jt-forged01"`, `members/"n-forged01"`} {
			if !strings.Contains(out, k) {
				t.Errorf("audit verify does not name %s: %q", k, out)
			}
		}
	})
}

// forgedAPIToken is the row of an API token id with an admin policy for
// subject and the hash of bearer, as an intruder writing the store
// without the data key makes it.
func forgedAPIToken(id, subject, bearer string, now time.Time) []byte {
	b, _ := json.Marshal(map[string]any{
		"tokenId": id, "name": "forged", "kind": "api", "subject": subject,
		"policy": iam.AdminPolicy(),
		"hash":   crypto.HashToken(bearer), "createdAt": now, "expiresAt": now.Add(time.Hour),
	})
	return b
}

// nodeID is the founder's own node id (the first member).
func nodeID(t *testing.T, f *stratumtest.Founder, admin string) string {
	t.Helper()
	status, body, err := call(f, "GET", "/v1/admin/cluster/members", admin, nil)
	var v struct{ Members []struct{ NodeID string } }
	if err != nil || status != 200 || json.Unmarshal(body, &v) != nil || len(v.Members) == 0 {
		t.Fatalf("members: %d %s %v", status, body, err)
	}
	return v.Members[0].NodeID
}

func rejectedSubjects(t *testing.T, f *stratumtest.Founder, admin string) []string {
	t.Helper()
	status, body, err := call(f, "GET", "/v1/admin/audit?limit=1000", admin, nil)
	var v struct {
		Events []struct{ Kind, Subject string }
	}
	if err != nil || status != 200 || json.Unmarshal(body, &v) != nil {
		t.Fatalf("audit: %d %s %v", status, body, err)
	}
	var out []string
	for _, e := range v.Events {
		if e.Kind == "store.record.rejected" {
			out = append(out, e.Subject)
		}
	}
	return out
}

func rejectedMetric(t *testing.T, f *stratumtest.Founder) float64 {
	t.Helper()
	_, body, err := call(f, "GET", "/metrics", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "stratum_store_records_rejected_total "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return -1
}

// TestTrust16_2_SchemaSetBackSignsNothing: the intruder who can write the
// store makes it look like one from before MACs (every MAC stripped, the
// sealed mark of authenticated records removed, the schema level set
// below the MAC migration) and adds an API token row of its own. The
// migration would give every record its MAC, the forged row included. A
// founder that already ran the store refuses it before migrating (its
// audit high-water mark, outside the store, records the level), so the
// row stays unsigned and the bearer gets nothing.
func TestTrust16_2_SchemaSetBackSignsNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, dir, dsn, email := o.f, o.dir, o.dsn, o.email
		f.Stop(os.Interrupt, 20*time.Second)

		now := time.Now().UTC()
		bearer := "sat1.tok-setback01.chosen-secret-of-the-intruder"
		apiToken := forgedAPIToken("tok-setback01", email, bearer, now)
		if dsn == "" {
			boltEdit(t, dir, stratumtest.StripRecordMACs)
		} else {
			pgExec(t, dsn, `UPDATE stratum_kv SET value = substring(value from 37) WHERE substring(value from 1 for 4) = '\x00736d01'::bytea`)
			pgExec(t, dsn, "DELETE FROM stratum_kv WHERE bucket = 'meta' AND key = $1", []byte("recordsAuthenticated"))
		}
		setSchema(t, dir, dsn, migrationBefore(t, "authenticated records"))
		forgeRows(t, dir, dsn, []forgedRow{{"iam-tokens", "tok-setback01", string(apiToken)}})

		g, err := stratumtest.Spawn(stratumtest.FounderOptions{Dir: dir, Dev: true, Args: serveStore(dsn)})
		if err == nil {
			defer g.Kill()
			status, body, _ := call(g, "GET", "/v1/iam/tokens", bearer, nil)
			t.Fatalf("a founder started on a store whose level was set back; the forged bearer got %d %s", status, body)
		}
		if !strings.Contains(err.Error(), "set back") || !strings.Contains(err.Error(), "--accept-audit-rollback") {
			t.Errorf("start refused with %v, want the level set back and the flag named", err)
		}
		// Nor does moving the store to PostgreSQL sign it.
		if dsn == "" {
			r := stratum(t, "migrate", "--data", dir, "--to", pgtest.DSN(t))
			if r.code == 0 || !strings.Contains(r.stderr, "set back") {
				t.Errorf("migrate of the set-back store = %d %q %q, want a refusal naming the level set back", r.code, r.stdout, r.stderr)
			}
		}
		// Nothing was migrated: the forged row carries no MAC.
		if dsn == "" {
			boltEdit(t, dir, func(tx *bolt.Tx) error {
				if _, ok := store.RecordPayload(tx.Bucket([]byte("iam-tokens")).Get([]byte("tok-setback01"))); ok {
					t.Error("the refused start signed the forged row")
				}
				return nil
			})
		}
	})
}

// TestTrust16_2_RejectedUserEndsItsSessions: an account that must change
// its password (SPEC 16.1) has a session that may only change it. The
// intruder who can write the store cannot forge the account, but it can
// break it: a user row that fails its MAC reads as absent. Before the
// fix a session of an absent account kept its policy and lost the
// must-change flag (every action); a session now needs its account.
func TestTrust16_2_RejectedUserEndsItsSessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, dir, dsn, email, password := o.f, o.dir, o.dsn, o.email, o.password
		f.Stop(os.Interrupt, 20*time.Second)

		// The account must change its password (set with the data
		// key, as the 16.1 migration does).
		markMustChange(t, dir, dsn, email, password)

		f = stratumtest.ServeDev(t, dir, serveStore(dsn)...)
		status, body, err := call(f, "POST", "/v1/auth/login", "", map[string]any{"email": email, "password": password})
		var sess struct {
			Token              string
			MustChangePassword bool
		}
		if err != nil || status != 200 || json.Unmarshal(body, &sess) != nil || !sess.MustChangePassword {
			t.Fatalf("login: %d %s %v, want 200 with mustChangePassword", status, body, err)
		}
		if status, body, _ := call(f, "GET", "/v1/iam/tokens", sess.Token, nil); status != 403 {
			t.Fatalf("GET /v1/iam/tokens before the change: %d %s, want 403", status, body)
		}

		// The attack: the account's row rewritten without the data key.
		forged, _ := json.Marshal(map[string]any{"email": strings.ToLower(email), "passwordHash": "x", "mustChangePassword": false})
		if dsn == "" {
			f.Stop(os.Interrupt, 20*time.Second)
			forgeRows(t, dir, dsn, []forgedRow{{"iam-users", strings.ToLower(email), string(forged)}})
			f = stratumtest.ServeDev(t, dir, serveStore(dsn)...)
		} else {
			pgExec(t, dsn, "UPDATE stratum_kv SET value = $1 WHERE bucket = 'iam-users' AND key = $2", forged, []byte(strings.ToLower(email)))
		}
		for _, p := range []string{"/v1/iam/tokens", "/v1/admin/join/registrations", "/v1/auth/self"} {
			if status, body, _ := call(f, "GET", p, sess.Token, nil); status < 400 {
				t.Errorf("GET %s with the session of an account whose row fails its MAC: %d %s, want a refusal", p, status, body)
			}
		}
		if status, body, _ := call(f, "POST", "/v1/admin/join/tokens", sess.Token, map[string]any{"role": "worker"}); status < 400 {
			t.Errorf("a join token from that session: %d %s", status, body)
		}
	})
}

// TestTrust16_2_RejectedAdmissionReleaseAdmitsNobody: the operator raised
// the admission release to 0.2.0; the intruder who can write the store
// breaks its row (it cannot forge one). Before the fix a row failing its
// MAC read as "none stored" and the admission release fell back to the
// cluster's first release, 0.1.0: a joiner on 0.1.0 registered (201).
// Now nobody is admitted until the operator sets it again.
func TestTrust16_2_RejectedAdmissionReleaseAdmitsNobody(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, dir, dsn, email, password := o.f, o.dir, o.dsn, o.email, o.password
		admin := f.Login(t, email, password).Token
		setRelease := func(rel string) {
			t.Helper()
			if status, body, err := call(f, "PUT", "/v1/admin/cluster/release", admin, map[string]any{"release": rel}); err != nil || status != 200 {
				t.Fatalf("set the admission release to %s: %d %s %v", rel, status, body, err)
			}
		}
		// The join tokens are made first: making one needs the
		// admission release too.
		var tokens []string
		for range 4 {
			status, body, err := call(f, "POST", "/v1/admin/join/tokens", admin, map[string]any{"role": "worker"})
			var tok struct{ Token string }
			if err != nil || status != 201 || json.Unmarshal(body, &tok) != nil {
				t.Fatalf("join token: %d %s %v", status, body, err)
			}
			tokens = append(tokens, tok.Token)
		}
		register := func(release, ip string) (int, []byte) {
			t.Helper()
			tok := tokens[0]
			tokens = tokens[1:]
			j := newJoinerClient(t, f.Dir+"/ca.pem")
			return j.do(t, "POST", "https://"+f.Join+"/v1/join/registrations", map[string]any{"token": tok, "release": release, "hostname": "old-1", "mgmtIp": ip})
		}
		setRelease("0.2.0")
		if status, body := register("0.1.0", "192.0.2.61"); status != 409 {
			t.Fatalf("a 0.1.0 joiner with admission 0.2.0: %d %s, want 409", status, body)
		}

		forged := []forgedRow{{"cluster", "admission-release", "0.1.0"}}
		if dsn == "" {
			f.Stop(os.Interrupt, 20*time.Second)
			forgeRows(t, dir, dsn, forged)
			f = stratumtest.ServeDev(t, dir, serveStore(dsn)...)
			admin = f.Login(t, email, password).Token
		} else {
			pgExec(t, dsn, "UPDATE stratum_kv SET value = $1 WHERE bucket = 'cluster' AND key = $2", []byte("0.1.0"), []byte("admission-release"))
		}
		if status, body := register("0.1.0", "192.0.2.62"); status == 201 || status < 400 {
			t.Fatalf("a 0.1.0 joiner after the admission release's row was broken: %d %s, want a refusal", status, body)
		}
		// The operator sets it again; 0.1.0 is refused as before.
		setRelease("0.2.0")
		if status, body := register("0.1.0", "192.0.2.63"); status != 409 {
			t.Errorf("a 0.1.0 joiner once the operator set 0.2.0 again: %d %s, want 409", status, body)
		}
		if status, body := register("0.2.0", "192.0.2.64"); status != 201 {
			t.Errorf("a 0.2.0 joiner: %d %s, want 201", status, body)
		}
	})
}

// TestTrust16_1_MustChangeHoldsAPITokens: an account marked "must change
// password" (its password was the cluster secret delivered to nodes by an
// earlier build) keeps no API token working until it is changed: a token
// minted under it while the password was known outside (before the fix:
// 200 and a join token) is held as its sessions are, and the change ends
// it.
func TestTrust16_1_MustChangeHoldsAPITokens(t *testing.T) {
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	admin := f.Login(t, email, password).Token
	status, body, err := call(f, "POST", "/v1/iam/tokens", admin, map[string]any{"name": "minted-while-known", "policy": iam.AdminPolicy()})
	var tok struct{ Token string }
	if err != nil || status != 201 || json.Unmarshal(body, &tok) != nil {
		t.Fatalf("API token: %d %s %v", status, body, err)
	}
	f.Stop(os.Interrupt, 20*time.Second)
	markMustChange(t, dir, "", email, password)

	f = stratumtest.ServeDev(t, dir)
	for _, p := range []string{"/v1/iam/tokens", "/v1/admin/join/registrations"} {
		status, body, _ := call(f, "GET", p, tok.Token, nil)
		var e struct{ Details map[string]any }
		_ = json.Unmarshal(body, &e)
		if status != 403 || e.Details["mustChangePassword"] != true {
			t.Errorf("GET %s with an API token of a must-change account: %d %s, want 403 with mustChangePassword", p, status, body)
		}
	}
	if status, body, _ := call(f, "POST", "/v1/admin/join/tokens", tok.Token, map[string]any{"role": "worker"}); status != 403 {
		t.Errorf("a join token from an API token of a must-change account: %d %s, want 403", status, body)
	}
	// The change ends the account's tokens: the one minted while the
	// password was known outside never acts again.
	sess := f.Login(t, email, password).Token
	if status, body, _ := call(f, "POST", "/v1/auth/password", sess, map[string]any{"currentPassword": password, "newPassword": "a-new-appliance-password"}); status >= 300 {
		t.Fatalf("password change: %d %s", status, body)
	}
	if status, body, _ := call(f, "GET", "/v1/iam/tokens", tok.Token, nil); status != 401 {
		t.Errorf("the API token after the change: %d %s, want 401", status, body)
	}
}

// TestTrust16_2_RejectionAuditCannotBeSilenced: the founder audits a
// record failing its MAC once, and remembers that it did in a mark in the
// store. The intruder who writes a forged row also writes that mark
// (before the fix a plain SHA-256 of the row, so the forgery was never
// audited). The mark is sealed now: the forged one is not believed.
func TestTrust16_2_RejectionAuditCannotBeSilenced(t *testing.T) {
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	f.Stop(os.Interrupt, 20*time.Second)

	now := time.Now().UTC()
	bearer := "sat1.tok-quiet01.chosen-secret-of-the-intruder"
	row, _ := json.Marshal(map[string]any{
		"tokenId": "tok-quiet01", "name": "forged", "kind": "api", "subject": email,
		"policy": iam.AdminPolicy(), "hash": crypto.HashToken(bearer), "createdAt": now, "expiresAt": now.Add(time.Hour),
	})
	sum := sha256.Sum256(row)
	forgeRows(t, dir, "", []forgedRow{
		{"iam-tokens", "tok-quiet01", string(row)},
		{"meta", "rejected/iam-tokens/" + hex.EncodeToString([]byte("tok-quiet01")), string(sum[:])},
	})

	f = stratumtest.ServeDev(t, dir)
	if status, body, _ := call(f, "GET", "/v1/iam/tokens", bearer, nil); status != 401 {
		t.Fatalf("the forged bearer: %d %s, want 401", status, body)
	}
	admin := f.Login(t, email, password).Token
	var subjects []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if subjects = rejectedSubjects(t, f, admin); slices.Contains(subjects, "iam-tokens/tok-quiet01") {
			return
		}
	}
	t.Fatalf("the forged row was not audited (a forged mark silenced it): rejected events %v", subjects)
}

// markMustChange marks the account "must change password" in a stopped
// founder's store (the bbolt file in dir, or the database dsn), with the
// data key, as the 16.1 migration does.
func markMustChange(t *testing.T, dir, dsn, email, password string) {
	t.Helper()
	key, err := crypto.LoadOrCreateDataKey(filepath.Join(dir, "data.key"), false)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "stratum.db")
	if dsn != "" {
		target = dsn
	}
	db, err := store.Open(target, key)
	if err != nil {
		t.Fatal(err)
	}
	var marked bool
	err = db.Update(func(tx *store.Tx) error {
		marked, err = iam.MarkMustChangeIfPassword(tx, email, password, "test")
		return err
	})
	db.Close()
	if err != nil || !marked {
		t.Fatalf("mark must-change: %v %v", marked, err)
	}
}

// TestTrust16_2_DroppedReleaseKeyTrustsNothing: a founder trusts key K1.
// An intruder who can write the data directory drops K2.pub into
// DIR/release-keys: a release signed by K2 is refused, naming the file
// and the command that trusts it, and nothing is imported. A record for
// K2 written into the store without the data key changes nothing. The
// admin trusting K2 (stratum release trust-key) makes it import, audited.
func TestTrust16_2_DroppedReleaseKeyTrustsNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, dir, dsn := o.f, o.dir, o.dsn
		k1 := stratumtest.SignedReleaseTree(t, "0.2.0", nil, 1024)
		k1.TrustOn(t, f)
		f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": k1.Dir}, 201, nil)

		k2 := stratumtest.SignedReleaseTree(t, "0.3.0", nil, 1024)
		dropped := filepath.Join(dir, "release-keys", "k2.pub")
		pem, err := os.ReadFile(k2.PubFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dropped, pem, 0o644); err != nil {
			t.Fatal(err)
		}
		refused := func(when string) {
			t.Helper()
			refusedImport(t, f, when, k2, 400, dropped)
		}
		refused("a dropped key file")

		forged, _ := json.Marshal(map[string]any{"keyId": k2.KeyID, "file": "k2.pub", "trustedAt": time.Now().UTC(), "trustedBy": "user:" + o.email})
		if dsn == "" {
			f.Stop(os.Interrupt, 20*time.Second)
			forgeRows(t, dir, dsn, []forgedRow{{"release-keys", k2.KeyID, string(forged)}})
			f = stratumtest.ServeDev(t, dir, serveStore(dsn)...)
		} else {
			forgeRows(t, dir, dsn, []forgedRow{{"release-keys", k2.KeyID, string(forged)}})
		}
		refused("a forged key record")

		env := cliEnv(t, f)
		cliLogin(t, f, env)
		if r := stratumEnv(t, env, "release", "trust-key", dropped); r.code != 0 || !strings.Contains(r.stdout, k2.KeyID) {
			t.Fatalf("release trust-key: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": k2.Dir}, 201, nil)
		var audit struct {
			Events []struct {
				Kind, Subject string
				Data          map[string]string
			}
		}
		f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
		if !slices.ContainsFunc(audit.Events, func(e struct {
			Kind, Subject string
			Data          map[string]string
		}) bool {
			return e.Kind == "release.key.trusted" && e.Subject == k2.KeyID && e.Data["file"] == "k2.pub"
		}) {
			t.Fatalf("release.key.trusted of %s is not audited: %+v", k2.KeyID, audit.Events)
		}
	})
}

// TestTrust16_2_EmptiedReleaseKeysAdoptNothing: a founder adopted K1 (its
// file was in DIR/release-keys at its first start) and imported a release
// signed by it. Stopped, the intruder who can write the store (the bbolt
// file, or the database as its owner) empties the release-keys bucket,
// the key records and the adoption mark, and drops K2.pub beside K1's
// file, for the next start to adopt. The audit chain records the
// adoption: nothing is adopted again. K2 trusts nothing (its release is
// refused, naming the file, nothing imported) and K1, whose record is
// gone, is not trusted again behind the operator's back; the release
// imported stays. The intruder then also deletes the adoption's audit
// event: before the fix the chain, read without checking its links, held
// no adoption and K2.pub was adopted (its release imported). A chain that
// does not verify adopts nothing. The operator trusts K1 again with
// stratum release trust-key.
func TestTrust16_2_EmptiedReleaseKeysAdoptNothing(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			dir, dsn := t.TempDir(), be.dsn(t)
			k1 := stratumtest.SignedReleaseTree(t, "0.2.0", nil, 1024)
			k1.Trust(t, dir)
			f := stratumtest.ServeDev(t, dir, serveStore(dsn)...)
			f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": k1.Dir}, 201, nil)
			k1File := filepath.Join(dir, "release-keys", k1.KeyID[:16]+".pub")

			k2 := stratumtest.SignedReleaseTree(t, "0.3.0", nil, 1024)
			dropped := filepath.Join(dir, "release-keys", "k2.pub")
			pem, err := os.ReadFile(k2.PubFile)
			if err != nil {
				t.Fatal(err)
			}
			attack := func(when string, deleteEvent bool, wantAdoptions int) {
				t.Helper()
				f.Stop(os.Interrupt, 20*time.Second)
				emptyReleaseKeys(t, dir, dsn, deleteEvent)
				if err := os.WriteFile(dropped, pem, 0o644); err != nil {
					t.Fatal(err)
				}
				f = stratumtest.ServeDev(t, dir, serveStore(dsn)...)

				// No key is trusted: CONFLICT, naming each file and how to
				// trust it; 0.2.0 is kept.
				if msg := refusedImport(t, f, when, k2, 409, dropped); !strings.Contains(msg, "no trusted key") {
					t.Fatalf("%s: the refusal does not say that no key is trusted: %s", when, msg)
				}
				var keys struct{ Keys []wire.ReleaseKey }
				f.Operator(t).Must(t, "GET", "/v1/admin/release-keys", nil, 200, &keys)
				if len(keys.Keys) != 2 || slices.ContainsFunc(keys.Keys, func(k wire.ReleaseKey) bool { return k.Trusted }) {
					t.Fatalf("%s: release keys %+v, want K1's file and k2.pub, neither trusted", when, keys.Keys)
				}
				if n := adoptions(t, f); n != wantAdoptions {
					t.Fatalf("%s: %d release.keys.adopted events, want %d (none but the first start's)", when, n, wantAdoptions)
				}
				if f.LogCount("nothing is adopted") == 0 {
					t.Errorf("%s: the founder does not say that nothing was adopted: %s", when, f.OutputTail(20))
				}
			}
			attack("the bucket emptied", false, 1)
			attack("the bucket emptied and the adoption's audit event deleted", true, 0)

			// The operator trusts K1 again: its releases import.
			env := cliEnv(t, f)
			cliLogin(t, f, env)
			if r := stratumEnv(t, env, "release", "trust-key", k1File); r.code != 0 || !strings.Contains(r.stdout, k1.KeyID) {
				t.Fatalf("release trust-key %s: exit %d %q %q", k1File, r.code, r.stdout, r.stderr)
			}
			f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": k1.Dir}, 201, nil)
		})
	}
}

// refusedImport imports tree (release 0.3.0) on f, which holds 0.2.0
// only, and checks that it is refused with status, naming the key file
// dropped and the command that trusts it, and that nothing was imported;
// it returns the refusal's message.
func refusedImport(t *testing.T, f *stratumtest.Founder, when string, tree stratumtest.ReleaseTree, status int, dropped string) string {
	t.Helper()
	e := f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": tree.Dir}, status, nil)
	if !strings.Contains(e.Message, dropped) || !strings.Contains(e.Message, "stratum release trust-key "+dropped) {
		t.Fatalf("%s: the refusal does not name %s and how to trust it: %s", when, dropped, e.Message)
	}
	var list struct{ Releases []struct{ Release string } }
	f.Operator(t).Must(t, "GET", "/v1/admin/releases", nil, 200, &list)
	if len(list.Releases) != 1 || list.Releases[0].Release != "0.2.0" {
		t.Fatalf("%s: releases %+v, want 0.2.0 only", when, list.Releases)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "releases", "0.3.0")); !os.IsNotExist(err) {
		t.Fatalf("%s: the refused release is on disk: %v", when, err)
	}
	return e.Message
}

// emptyReleaseKeys is the intruder's edit of a stopped founder's store:
// every record of the release-keys bucket (the trusted keys and the
// adoption mark) deleted, and with deleteEvent the audit event of the
// adoption too; in the bbolt file, or with plain SQL as the database's
// owner.
func emptyReleaseKeys(t *testing.T, dir, dsn string, deleteEvent bool) {
	t.Helper()
	const adopted = `"kind":"release.keys.adopted"`
	if dsn != "" {
		pgExec(t, dsn, "DELETE FROM stratum_kv WHERE bucket = 'release-keys'")
		if deleteEvent {
			pgExec(t, dsn, "DELETE FROM stratum_kv WHERE bucket = 'audit' AND position($1::bytea in value) > 0", []byte(adopted))
		}
		return
	}
	boltEdit(t, dir, func(tx *bolt.Tx) error {
		deleteWhere := func(bucket string, match func(v []byte) bool) error {
			b := tx.Bucket([]byte(bucket))
			var keys [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				if match(v) {
					keys = append(keys, append([]byte(nil), k...))
				}
				return nil
			}); err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}
		if err := deleteWhere("release-keys", func([]byte) bool { return true }); err != nil {
			return err
		}
		if !deleteEvent {
			return nil
		}
		return deleteWhere("audit", func(v []byte) bool { return strings.Contains(string(v), adopted) })
	})
}

// adoptions counts the release.keys.adopted events of f's audit log.
func adoptions(t *testing.T, f *stratumtest.Founder) int {
	t.Helper()
	var audit struct{ Events []struct{ Kind string } }
	f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
	n := 0
	for _, e := range audit.Events {
		if e.Kind == "release.keys.adopted" {
			n++
		}
	}
	return n
}
