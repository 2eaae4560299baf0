package join

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

func TestCreateToken(t *testing.T) {
	e := newEnv(t)
	tok, err := e.svc.CreateToken(e.admin, wire.JoinTokenRequest{Role: "worker", TTL: "2h", Uses: 3, Description: "rack 2"})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sjt1\.jt-[a-z0-9]{10}\.[A-Za-z0-9_-]{27}$`).MatchString(tok.Token) {
		t.Errorf("token %q does not have the sjt1.<id>.<160-bit secret> form", tok.Token)
	}
	if !strings.HasPrefix(tok.Token, "sjt1."+tok.TokenID+".") {
		t.Errorf("token %q does not carry its id %s", tok.Token, tok.TokenID)
	}
	want := "stratum join --founder 192.0.2.10:9443 --token " + tok.Token + " --ca-pin " + e.ca.Pin()
	if tok.JoinCommand != want {
		t.Errorf("joinCommand\n got %q\nwant %q", tok.JoinCommand, want)
	}
	// A --dev founder's command names the admission release: its nodes
	// are dev machines with no stratum image to say it.
	dev := newEnv(t, func(c *Config) { c.JoinCommandNamesRelease = true })
	if err := dev.db.Update(func(tx *store.Tx) error {
		_, err := cluster.SetAdmissionRelease(tx, "test", wire.SetAdmissionRequest{Release: "0.7.0"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	devTok, err := dev.svc.CreateToken(dev.admin, wire.JoinTokenRequest{Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "stratum join --founder 192.0.2.10:9443 --token " + devTok.Token + " --ca-pin " + dev.ca.Pin() + " --release 0.7.0"; devTok.JoinCommand != want {
		t.Errorf("dev joinCommand\n got %q\nwant %q", devTok.JoinCommand, want)
	}
	if tok.UsesLeft != 3 || tok.Role != "worker" || !tok.ExpiresAt.Equal(e.clock.Now().Add(2*time.Hour)) {
		t.Errorf("token view %+v", tok)
	}

	list, err := e.svc.ListTokens()
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	raw, _ := json.Marshal(list)
	secret := tok.Token[strings.LastIndex(tok.Token, ".")+1:]
	if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "hash") {
		t.Errorf("listing shows a secret or hash: %s", raw)
	}
	if list[0].State != "active" || list[0].Description != "rack 2" {
		t.Errorf("listed %+v", list[0])
	}
}

func TestCreateTokenValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		req    wire.JoinTokenRequest
		fields []string
	}{
		{"all bad", wire.JoinTokenRequest{Role: "admin", TTL: "-1h", Uses: 1001, Description: strings.Repeat("x", 257)}, []string{"role", "ttl", "uses", "description"}},
		{"ttl over 30 days", wire.JoinTokenRequest{Role: "worker", TTL: "31d"}, []string{"ttl"}},
		{"ttl not a duration", wire.JoinTokenRequest{Role: "worker", TTL: "soon"}, []string{"ttl"}},
		{"no role", wire.JoinTokenRequest{}, []string{"role"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.CreateToken(e.admin, tc.req)
			wantCode(t, err, apierr.InvalidInput)
			if got := fieldNames(err); !slices.Equal(got, tc.fields) {
				t.Errorf("fields %v, want %v", got, tc.fields)
			}
		})
	}
	if n := e.auditCount(); n != 1 { // cluster.initialized only
		t.Errorf("failed requests wrote %d audit events", n-1)
	}
}

func TestDecodeCreateTokenRequest(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"ok", `{"role":"postgres","ttl":"7d","uses":2}`, nil},
		{"unknown fields named", `{"role":"worker","rol":"x","extra":1}`, []string{"rol", "extra"}},
		{"explicit zero uses", `{"role":"worker","uses":0}`, []string{"uses"}},
		{"fractional uses", `{"role":"worker","uses":1.5}`, []string{"uses"}},
		{"wrong types", `{"role":1,"ttl":true}`, []string{"role", "ttl"}},
		{"malformed", `{"role":`, []string{""}},
		{"not an object", `[1]`, []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCreateTokenRequest([]byte(tc.body))
			if tc.fields == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, apierr.InvalidInput)
			if got := fieldNames(err); !slices.Equal(got, tc.fields) {
				t.Errorf("fields %v, want %v", got, tc.fields)
			}
		})
	}
}

func TestRevokeToken(t *testing.T) {
	e := newEnv(t)
	tok, err := e.svc.CreateToken(e.admin, wire.JoinTokenRequest{Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeToken(e.admin, tok.TokenID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.svc.RevokeToken(e.admin, tok.TokenID), apierr.Conflict)
	wantCode(t, e.svc.RevokeToken(e.admin, "jt-nosuchtok"), apierr.NotFound)
	list, _ := e.svc.ListTokens()
	if list[0].State != "revoked" {
		t.Errorf("state %s", list[0].State)
	}
}

// TestTokenRevokedAfterUse: the service keeps the token records it
// decoded (store.Decoded), yet a token read, used and then revoked is
// refused: the record's bytes changed, so it is read as it is now.
func TestTokenRevokedAfterUse(t *testing.T) {
	e := newEnv(t)
	tok, err := e.svc.CreateToken(e.admin, wire.JoinTokenRequest{Role: "worker", Uses: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.register("first", tok.Token, clusterRelease, false); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeToken(e.admin, tok.TokenID); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.register("second", tok.Token, clusterRelease, false)
	wantCode(t, err, apierr.JoinTokenInvalid)
}

func TestTokenInvalid(t *testing.T) {
	e := newEnv(t)
	used := e.token("worker", 1)
	if _, _, err := e.register("first", used, clusterRelease, false); err != nil {
		t.Fatal(err)
	}
	expiring, err := e.svc.CreateToken(e.admin, wire.JoinTokenRequest{Role: "worker", TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := e.svc.CreateToken(e.admin, wire.JoinTokenRequest{Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeToken(e.admin, revoked.TokenID); err != nil {
		t.Fatal(err)
	}
	good := e.token("worker", 1)
	e.clock.Add(time.Hour) // expiring is now exactly expired
	tampered := good[:len(good)-1] + "A"
	if strings.HasSuffix(good, "A") {
		tampered = good[:len(good)-1] + "B"
	}

	var message string
	for i, tc := range []struct{ name, token string }{
		{"used up", used},
		{"expired", expiring.Token},
		{"revoked", revoked.Token},
		{"unknown id", "sjt1.jt-unknown00.abc"},
		{"wrong secret", tampered},
		{"malformed", "not-a-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.auditCount()
			_, _, err := e.register("k"+strconv.Itoa(i), tc.token, clusterRelease, false)
			ae := wantCode(t, err, apierr.JoinTokenInvalid)
			if message == "" {
				message = ae.Message
			} else if ae.Message != message {
				t.Errorf("message %q differs from %q: the reason must not leak", ae.Message, message)
			}
			if e.auditCount() != before {
				t.Error("a refused registration wrote to the store")
			}
		})
	}
	// The untouched good token still works.
	if _, created, err := e.register("late", good, clusterRelease, false); err != nil || !created {
		t.Fatalf("good token: %v", err)
	}
}

// TestSpentTokenGuard: precheck lets a token on to its batch without a
// read when the token as its batch last read or wrote it was redeemable.
// A batch that spends the last use remembers the token spent, so the
// next request with it meets precheck's read; a token spent where this
// service did not see it (revoked here through a plain write, or by
// another replica) is refused by the batch, whose read is then the last
// one: the next request with it is refused before any batch.
func TestSpentTokenGuard(t *testing.T) {
	e := newEnv(t)
	tok := e.token("worker", 2)
	if _, _, err := e.register("first", tok, clusterRelease, false); err != nil {
		t.Fatal(err)
	}
	if !redeemableAsLastRead(tok, e.clock.Now(), &e.svc.tokens) {
		t.Fatal("the batch that spent one of two uses wrote the token redeemable: the guard should let the next request on")
	}
	if _, _, err := e.register("second", tok, clusterRelease, false); err != nil {
		t.Fatal(err)
	}
	if redeemableAsLastRead(tok, e.clock.Now(), &e.svc.tokens) {
		t.Fatal("the batch that spent the last use wrote the token spent: the guard should not let the next request on")
	}
	// Revoked behind the guard's back: it still remembers one use left.
	revoked := e.token("worker", 2)
	if _, _, err := e.register("third", revoked, clusterRelease, false); err != nil {
		t.Fatal(err)
	}
	id, _ := tokenID(revoked)
	if err := e.db.Update(func(tx *store.Tx) error {
		rec, _, err := bucketTokens.Get(tx, id)
		rec.RevokedAt = e.clock.Now()
		if err == nil {
			err = bucketTokens.Put(tx, id, rec)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !redeemableAsLastRead(revoked, e.clock.Now(), &e.svc.tokens) {
		t.Fatal("the guard saw the revocation it was not told of")
	}
	for i, c := range []struct{ key, token string }{{"fourth", tok}, {"fifth", revoked}, {"sixth", revoked}} {
		before := e.auditCount()
		_, _, err := e.register(c.key, c.token, clusterRelease, false)
		wantCode(t, err, apierr.JoinTokenInvalid)
		if e.auditCount() != before {
			t.Errorf("request %d with a spent token wrote to the store", i+1)
		}
		if redeemableAsLastRead(c.token, e.clock.Now(), &e.svc.tokens) {
			t.Errorf("after request %d the guard still takes the spent token for redeemable", i+1)
		}
	}
	if redeemableAsLastRead("not-a-token", e.clock.Now(), &e.svc.tokens) {
		t.Error("a malformed token passed the guard")
	}
}
