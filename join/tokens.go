package join

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/iam"
	"stratum/store"
	"stratum/strictjson"
	"stratum/wire"
)

// Roles a join token can grant.
var Roles = []string{"control-plane", "worker", "postgres"}

const (
	tokenPrefix        = "sjt1"
	tokenSecretBytes   = 20 // 160 bits
	defaultTokenTTL    = 24 * time.Hour
	maxTokenTTL        = 30 * 24 * time.Hour
	maxTokenUses       = 1000
	maxDescriptionSize = 256
)

type tokenRecord struct {
	ID          string    `json:"tokenId"`
	Hash        string    `json:"hash"`
	Role        string    `json:"role"`
	Description string    `json:"description"`
	Uses        int       `json:"uses"`
	UsesLeft    int       `json:"usesLeft"`
	CreatedBy   string    `json:"createdBy"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	RevokedAt   time.Time `json:"revokedAt,omitzero"`
}

func (t tokenRecord) state(now time.Time) string {
	switch {
	case !t.RevokedAt.IsZero():
		return "revoked"
	case !now.Before(t.ExpiresAt):
		return "expired"
	case t.UsesLeft <= 0:
		return "used-up"
	}
	return "active"
}

func (t tokenRecord) view(now time.Time) wire.JoinTokenView {
	return wire.JoinTokenView{TokenID: t.ID, Role: t.Role, Description: t.Description, Uses: t.Uses, UsesLeft: t.UsesLeft,
		State: t.state(now), CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// DecodeCreateTokenRequest decodes strictly: unknown fields are named, and
// an explicit "uses": 0 is refused rather than taken as the default.
func DecodeCreateTokenRequest(body []byte) (wire.JoinTokenRequest, error) {
	// Uses is a pointer on the wire only, to tell an explicit 0 from none.
	var in struct {
		wire.JoinTokenRequest
		Uses *int `json:"uses"`
	}
	err := strictjson.DecodeChecked(body, &in, "the join token request has problems", func() apierr.Fields {
		var f apierr.Fields
		if u := in.Uses; u != nil {
			if *u < 1 || *u > maxTokenUses {
				f.Add("uses", "must be a whole number from 1 to %d", maxTokenUses)
			} else {
				in.JoinTokenRequest.Uses = *u
			}
		}
		_, problems := validateTokenRequest(in.JoinTokenRequest)
		return append(f, problems...)
	})
	if err != nil {
		return wire.JoinTokenRequest{}, err
	}
	return in.JoinTokenRequest, nil
}

// validate lists every problem and returns the TTL to use.
func validateTokenRequest(r wire.JoinTokenRequest) (time.Duration, apierr.Fields) {
	var f apierr.Fields
	if !contains(Roles, r.Role) {
		f.Add("role", "must be one of %s", strings.Join(Roles, ", "))
	}
	ttl := defaultTokenTTL
	if r.TTL != "" {
		d, ok := parseTTL(r.TTL)
		if !ok || d <= 0 || d > maxTokenTTL {
			f.Add("ttl", "must be a positive duration such as 24h or 7d, at most 30 days")
		} else {
			ttl = d
		}
	}
	if r.Uses < 0 || r.Uses > maxTokenUses {
		f.Add("uses", "must be a whole number from 1 to %d", maxTokenUses)
	}
	if len(r.Description) > maxDescriptionSize || !utf8.ValidString(r.Description) {
		f.Add("description", "at most %d bytes of UTF-8", maxDescriptionSize)
	}
	return ttl, f
}

// parseTTL accepts Go durations and whole days ("7d"), the unit operators
// think of tokens in.
func parseTTL(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 366 {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// CreateToken stores a new join token (hashed) and answers its one-time
// secret form and the joinCommand to give the new node.
func (s *Service) CreateToken(by iam.Principal, req wire.JoinTokenRequest) (wire.JoinToken, error) {
	ttl, f := validateTokenRequest(req)
	if err := f.Err("the join token request has problems"); err != nil {
		return wire.JoinToken{}, err
	}
	uses := req.Uses
	if uses == 0 {
		uses = 1
	}
	var out wire.JoinToken
	err := s.update(func(t *txn) error {
		pin, err := s.caPin(t.Tx)
		if err != nil {
			return err
		}
		id, err := unusedKey(t.Tx, bucketTokens, "jt-", 10)
		if err != nil {
			return err
		}
		secret := tokenPrefix + "." + id + "." + crypto.RandomSecret(tokenSecretBytes)
		rec := tokenRecord{ID: id, Hash: crypto.HashToken(secret), Role: req.Role, Description: req.Description,
			Uses: uses, UsesLeft: uses, CreatedBy: actorOf(by), CreatedAt: t.now, ExpiresAt: t.now.Add(ttl)}
		if err := bucketTokens.Put(t.Tx, id, rec); err != nil {
			return err
		}
		if err := t.Audit("join.token.created", actorOf(by), id, map[string]string{"role": rec.Role, "uses": strconv.Itoa(uses), "expiresAt": rec.ExpiresAt.Format(time.RFC3339)}); err != nil {
			return err
		}
		cmd := fmt.Sprintf("stratum join --founder %s --token %s --ca-pin %s", s.cfg.JoinAddr, secret, pin)
		if s.cfg.JoinCommandNamesRelease {
			rel, err := s.clusterRelease(t.Tx)
			if err != nil {
				return err
			}
			cmd += " --release " + rel
		}
		out = wire.JoinToken{TokenID: id, Token: secret, Role: rec.Role, ExpiresAt: rec.ExpiresAt, UsesLeft: uses, JoinCommand: cmd}
		return nil
	})
	return out, err
}

// ListTokens lists every join token, newest first.
func (s *Service) ListTokens() ([]wire.JoinTokenView, error) {
	now := s.now().UTC()
	out := []wire.JoinTokenView{}
	err := s.view(func(tx *store.Tx) error {
		return bucketTokens.ForEach(tx, func(_ string, t tokenRecord) error {
			out = append(out, t.view(now))
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, err
}

// RevokeToken revokes a token; revoking twice is a CONFLICT so a script
// learns its first call already did it.
func (s *Service) RevokeToken(by iam.Principal, tokenID string) error {
	return s.update(func(t *txn) error {
		rec, found, err := bucketTokens.Get(t.Tx, tokenID)
		if err != nil {
			return err
		}
		if !found {
			return apierr.New(apierr.NotFound, "no join token %s", tokenID)
		}
		if !rec.RevokedAt.IsZero() {
			return apierr.New(apierr.Conflict, "join token %s is already revoked", tokenID)
		}
		rec.RevokedAt = t.now
		if err := bucketTokens.Put(t.Tx, tokenID, rec); err != nil {
			return err
		}
		return t.Audit("join.token.revoked", actorOf(by), tokenID, nil)
	})
}

// errTokenInvalid is the one answer for every bad token, so a caller
// learns nothing about which part was wrong.
func errTokenInvalid() error {
	return apierr.New(apierr.JoinTokenInvalid, "the join token is unknown, expired, revoked or used up; ask the operator for a new one")
}

// redeemable finds the token a joiner presents, valid at now. The hash is
// compared in constant time, and a miss costs what a hit costs.
func redeemable(tx *store.Tx, token string, now time.Time, d *store.Decoded[tokenRecord]) (tokenRecord, error) {
	var rec tokenRecord
	id, ok := tokenID(token)
	if !ok {
		crypto.TokenMatches(token, crypto.HashToken("absent"))
		return rec, errTokenInvalid()
	}
	rec, found, err := bucketTokens.GetDecoded(tx, id, d)
	if err != nil {
		return rec, err
	}
	if !found {
		crypto.TokenMatches(token, crypto.HashToken("absent"))
		return rec, errTokenInvalid()
	}
	if !crypto.TokenMatches(token, rec.Hash) || rec.state(now) != "active" {
		return rec, errTokenInvalid()
	}
	return rec, nil
}

// redeemableAsLastRead says whether token was redeemable as its record
// read last (d.Peek): a guard's answer, not redeemable's.
func redeemableAsLastRead(token string, now time.Time, d *store.Decoded[tokenRecord]) bool {
	id, ok := tokenID(token)
	if !ok {
		return false
	}
	rec, ok := d.Peek(id)
	return ok && crypto.TokenMatches(token, rec.Hash) && rec.state(now) == "active"
}

// tokenID is the record key of a join token (prefix.id.secret); ok is
// false when token is not of that form.
func tokenID(token string) (id string, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != tokenPrefix || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// useToken spends one use of rec inside t and answers the uses it has
// left, which the registration's audit event names. The token's new
// record is remembered as decoded: the next registration of a rack,
// likely in the same commit, reads it without a MAC check or a decode.
func (t *txn) useToken(rec tokenRecord) (usesLeft int, err error) {
	rec.UsesLeft--
	return rec.UsesLeft, bucketTokens.PutDecoded(t.Tx, rec.ID, rec, &t.s.tokens)
}

// unusedKey draws prefix + n of [a-z0-9] until the id is free in bucket.
func unusedKey(tx *store.Tx, bucket store.Keyspace, prefix string, n int) (string, error) {
	for range 16 {
		id := crypto.RandomID(prefix, n)
		if !bucket.Has(tx, id) {
			return id, nil
		}
	}
	return "", fmt.Errorf("no free %s id after 16 draws", prefix)
}

func actorOf(p iam.Principal) string {
	if p.Subject == "" {
		return "unknown"
	}
	return p.Subject
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
