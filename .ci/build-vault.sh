#!/usr/bin/env bash
# Builds the OpenBao-API test server (HashiCorp Vault's dev server, which
# keeps the endpoints OpenBao forked) once into a cache directory outside
# the repository, keyed by version. Used by the OpenBao tests only: it is
# never shipped or linked (BUSL). See shared/NOTES.md for why each edit.
set -euo pipefail
V=1.21.4
CACHE=${STRATUM_TEST_CACHE:-/var/cache/stratum-test}/vault-$V
OUT=$CACHE/vault
if [ -x "$OUT" ]; then echo "vault $V: $OUT (cached)"; exit 0; fi
mkdir -p "$CACHE"
go mod download -json github.com/hashicorp/vault@v$V >/dev/null
D=$(mktemp -d)
trap 'chmod -R u+w "$D" 2>/dev/null; rm -rf "$D"' EXIT
cp -r "$(go env GOMODCACHE)/github.com/hashicorp/vault@v$V/." "$D"
chmod -R u+w "$D"
cd "$D"
# The module zip lacks ./api and ./sdk: take api v1.22.0 and sdk v0.21.0 from the proxy.
sed -i '/=> \.\/api\|=> \.\/sdk/d' go.mod
# sdk v0.21.0 differs from the tree in three places.
sed -i 's/func (i \*IdentityStore) activateDeduplication(ctx context.Context, req \*logical.Request) error {/func (i *IdentityStore) activateDeduplication(ctx context.Context, req *logical.Request, _ string) error {/' vault/identity_store_util.go
sed -i 's/ActivationFunc(ctx, nil)/ActivationFunc(ctx, nil, "")/' vault/logical_system_activation_flags.go
sed -i 's/restoredKeyName, err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force)/err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force)\n\trestoredKeyName := keyName/' builtin/logical/transit/path_restore.go
go build -mod=mod -o "$OUT.partial" .
mv "$OUT.partial" "$OUT"
echo "vault $V: $OUT (built)"
