package iam

import (
	"strconv"
	"time"

	"stratum/store"
)

// revokeWithDescendants revokes t and every token made under it, in the
// same transaction: a child never outlives the revocation of its parent.
// Each revoked descendant gets its own audit event naming the root.
func revokeWithDescendants(tx *store.Tx, actor string, t Token, kind string, now time.Time) error {
	children, err := childrenOf(tx)
	if err != nil {
		return err
	}
	var cascaded []Token
	queue := append([]Token(nil), children[t.ID]...)
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		queue = append(queue, children[c.ID]...)
		if c.RevokedAt.IsZero() {
			cascaded = append(cascaded, c)
		}
	}
	t.RevokedAt = now.UTC()
	if err := bucketTokens.Put(tx, t.ID, t); err != nil {
		return err
	}
	if err := tx.Audit(kind, actor, t.ID, map[string]string{"descendants": strconv.Itoa(len(cascaded))}); err != nil {
		return err
	}
	for _, c := range cascaded {
		c.RevokedAt = now.UTC()
		if err := bucketTokens.Put(tx, c.ID, c); err != nil {
			return err
		}
		if err := tx.Audit("iam.token.revoked", actor, c.ID, map[string]string{"cascadeFrom": t.ID}); err != nil {
			return err
		}
	}
	return nil
}

// childrenOf maps each token id to the tokens it created.
func childrenOf(tx *store.Tx) (map[string][]Token, error) {
	out := map[string][]Token{}
	err := forEachToken(tx, func(t Token) error {
		if t.Parent != "" {
			out[t.Parent] = append(out[t.Parent], t)
		}
		return nil
	})
	return out, err
}

func forEachToken(tx *store.Tx, fn func(t Token) error) error {
	return bucketTokens.ForEach(tx, func(_ string, t Token) error { return fn(t) })
}

// migrateTokens gives tokens made before parents were recorded their
// creator: they stay roots, owned by the user who made them. It is the
// store migration of schema 8, run once when an older store is opened.
func migrateTokens(tx *store.Tx) error {
	var old []Token
	err := forEachToken(tx, func(t Token) error {
		if t.CreatedBy == "" {
			old = append(old, t)
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return err
	}
	for _, t := range old {
		t.CreatedBy = "user:" + t.Subject
		if err := bucketTokens.Put(tx, t.ID, t); err != nil {
			return err
		}
	}
	return tx.Audit("iam.tokens.migrated", "stratum", bucketTokens.Name(), map[string]string{"tokens": strconv.Itoa(len(old)), "as": "roots owned by their creator"})
}
