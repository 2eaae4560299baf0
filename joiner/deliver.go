package joiner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"stratum/buildinfo"
	"stratum/crypto"
	"stratum/wire"
)

// Where the delivery goes, relative to --root.
const (
	etcDir     = "etc/stratum"
	secretsDir = "etc/stratum/secrets"
)

// outFile is one file of the delivery. A file whose content is empty is
// one the delivery does not carry (a Postgres replica has no admin
// password): a copy left from an earlier delivery is removed, so the node
// never runs on a stale secret.
type outFile struct {
	rel  string
	data []byte
	mode os.FileMode
}

// persisted summarises a written delivery for the log.
type persisted struct {
	nodeID, clusterID, role string
	generation              uint64
}

// persist writes the delivery under --root (SPEC 7 step 5). Everything is
// checked and rendered before the first write, so a bad delivery writes
// nothing; each file is then written atomically at its mode (temp file in
// the same directory, fsync, rename). The unseal key goes first, sealed
// to the TPM, as the seed demands "immediately on receipt".
func (j *joiner) persist(nodeYAML string, bundle json.RawMessage) (*persisted, error) {
	b, all, err := parseBundle(bundle)
	if err != nil {
		return nil, err
	}
	nodeID, err := checkBundle(b, j.cfg.CAPin, nodeYAML)
	if err != nil {
		return nil, err
	}
	public, err := publicBundle(all)
	if err != nil {
		return nil, err
	}
	cpEnv, err := renderEnv(controlPlaneEnv(b, nodeID))
	if err != nil {
		return nil, fmt.Errorf("controlplane.env: %w", err)
	}
	var axEnv []byte
	if b.AxdnsdEncryptionKey != "" {
		if axEnv, err = renderEnv([]envLine{{"ENCRYPTION_KEY", b.AxdnsdEncryptionKey}}); err != nil {
			return nil, fmt.Errorf("axdnsd.env: %w", err)
		}
	} else if b.Role == "control-plane" {
		// Other roles receive no cluster secrets (SPEC 16.1).
		j.log.printf("note: the bundle has no axdnsdEncryptionKey (a founder that predates it); axdnsd.env is not written")
	}
	cpJSON, err := controlPlaneJSON(b.Role, b.ControlPlane, buildinfo.Current())
	if err != nil {
		return nil, err
	}
	files := deliveryFiles(nodeYAML, public, b, cpEnv, axEnv, cpJSON, j.release)

	// Before the first write: a join that ends failed or rejected has
	// what was written removed (discardDelivery), also after a crash.
	if !j.st.Delivered {
		j.st.Delivered = true
		if err := j.st.save(j.cfg.StateDir); err != nil {
			return nil, err
		}
	}
	root := j.cfg.Root
	if err := os.MkdirAll(filepath.Join(root, etcDir), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Join(root, etcDir), err)
	}
	// MkdirAll leaves an existing directory's mode alone: set it, since
	// the secrets' 0600 means little in a directory others can list.
	sd := filepath.Join(root, secretsDir)
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", sd, err)
	}
	if err := os.Chmod(sd, 0o700); err != nil {
		return nil, err
	}
	unsealKey := ""
	if b.OpenBaoUnsealKey != nil {
		unsealKey = *b.OpenBaoUnsealKey
	}
	if err := j.storeUnsealKey(sd, unsealKey); err != nil {
		return nil, err
	}
	for _, f := range files {
		path := filepath.Join(root, filepath.FromSlash(f.rel))
		if len(f.data) == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove stale %s: %w", path, err)
			}
			continue
		}
		if err := crypto.WriteFileAtomic(path, f.data, f.mode); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return &persisted{nodeID: nodeID, clusterID: b.ClusterID, role: b.Role, generation: b.Generation}, nil
}

// deliveryFiles are the files of a delivery under --root, each with its
// content and mode (the unseal key, sealed or not, aside: storeUnsealKey).
// With no content at all they name every file a delivery may write, for
// discardDelivery.
func deliveryFiles(nodeYAML string, public []byte, b *wire.Bundle, cpEnv, axEnv, cpJSON []byte, release string) []outFile {
	rel := ""
	if release != "" {
		rel = release + "\n"
	}
	return []outFile{
		{etcDir + "/node.yaml", []byte(nodeYAML), 0o644},
		{etcDir + "/bundle.json", public, 0o644},
		{secretsDir + "/node.key", []byte(b.NodeKey), 0o600},
		{secretsDir + "/node.crt", []byte(b.NodeCert), 0o644},
		{secretsDir + "/ca.pem", []byte(b.CABundle), 0o644},
		{secretsDir + "/postgres-password", []byte(b.PostgresPassword), 0o600},
		{secretsDir + "/admin-password", []byte(b.AdminPassword), 0o600},
		{secretsDir + "/openbao-token", []byte(b.OpenBaoToken), 0o600},
		{secretsDir + "/axdnsd-encryption-key", []byte(b.AxdnsdEncryptionKey), 0o600},
		{secretsDir + "/openbao-node.token", []byte(b.OpenBaoNodeToken), 0o600},
		{etcDir + "/controlplane.env", cpEnv, 0o600},
		{etcDir + "/axdnsd.env", axEnv, 0o600},
		{etcDir + "/bootstrap-credentials.txt", bootstrapCredentials(b), 0o600},
		// What a control-plane node's control plane runs, for the agent's
		// record; removed on other roles.
		{controlPlaneFile, cpJSON, 0o644},
		// The release this node joined on, for the agent's record.
		{etcDir + "/release", []byte(rel), 0o644},
	}
}
