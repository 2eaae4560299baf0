package cluster

import (
	"stratum/openbao"
	"stratum/store"
)

const (
	keyOpenBao      = "openbao"               // bucketCluster: the cluster file's openbao: block
	keyOpenBaoToken = "openbao-founder-token" // bucketSecrets, sealed: the founder's own token
)

var openBaoSettings = store.NewField[openbao.Settings](bucketCluster, keyOpenBao)

// StoreOpenBao keeps the cluster file's openbao: block.
func StoreOpenBao(tx *store.Tx, s openbao.Settings) error {
	return openBaoSettings.Put(tx, s)
}

// LoadOpenBao answers the stored openbao: block (zero when none).
func LoadOpenBao(tx *store.Tx) (openbao.Settings, error) {
	s, _, err := openBaoSettings.Get(tx)
	return s, err
}

// StoreOpenBaoToken seals the founder's own OpenBao token (a converge's,
// or the cluster file's secrets.openBaoToken).
func StoreOpenBaoToken(tx *store.Tx, token string) error {
	return bucketSecrets.PutSealed(tx, keyOpenBaoToken, []byte(token))
}

// LoadOpenBaoToken opens the founder's stored OpenBao token; found is
// false when none was stored (the token file is used then).
func LoadOpenBaoToken(tx *store.Tx) (token string, found bool, err error) {
	v, found, err := bucketSecrets.GetSealed(tx, keyOpenBaoToken)
	if err != nil || !found || len(v) == 0 {
		return "", false, err
	}
	return string(v), true, nil
}
