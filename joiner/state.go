package joiner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"stratum/crypto"
	"stratum/semver"
)

// Files of the state dir besides the identity key.
const (
	stateFile   = "state.json" // where the registration stands (0600)
	releaseFile = "release"    // the release this machine runs after a self-upgrade
	releasesDir = "releases"   // verified release trees, one per release
	downloadDir = "downloads"  // partial downloads, never handed to the hook
)

// savedState is what a restarted joiner needs to pick up where it left
// off. It holds no secret: the token only as its SHA-256 (to tell a rerun
// with a new token from a rerun with the spent one), and never the
// delivery, which lives on the founder until the join is done.
type savedState struct {
	Founder     string `json:"founder"`
	CAPin       string `json:"caPin"`
	TokenSHA256 string `json:"tokenSha256"`
	JoinID      string `json:"joinId"`
	State       string `json:"state"`
	// DoneReported is set once the founder acknowledged phase done, so a
	// restart while waiting for joined does not report it again.
	DoneReported bool `json:"doneReported,omitempty"`
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// loadState reads the state file; a missing file is an empty state.
func loadState(dir string) (savedState, error) {
	var s savedState
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("state file %s is damaged (%v): remove it to register afresh", filepath.Join(dir, stateFile), err)
	}
	return s, nil
}

// save writes the state atomically (0600), so a crash leaves the old or
// the new state, never half of one.
func (s savedState) save(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := crypto.WriteFileAtomic(filepath.Join(dir, stateFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// readReleaseFile returns the release recorded after a self-upgrade, ""
// when there is none.
func readReleaseFile(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, releaseFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("release file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if err := semver.Valid(v); err != nil {
		return "", fmt.Errorf("%s holds %q: %v", filepath.Join(dir, releaseFile), v, err)
	}
	return v, nil
}

func writeReleaseFile(dir, v string) error {
	return crypto.WriteFileAtomic(filepath.Join(dir, releaseFile), []byte(v+"\n"), 0o644)
}

// resolveRelease picks the release to register with. The file written by
// a self-upgrade wins over --release when they differ and the file is the
// newer: a node's unit file keeps the --release of the image it was
// installed from, and registering with that after an upgrade would offer
// the same upgrade again forever.
func resolveRelease(flag, dir string, log *printer) (string, error) {
	file, err := readReleaseFile(dir)
	if err != nil {
		return "", err
	}
	if flag != "" {
		if err := semver.Valid(flag); err != nil {
			return "", fmt.Errorf("--release %q: %v", flag, err)
		}
	}
	switch {
	case flag == "" && file == "":
		return "", fmt.Errorf("--release is required: this machine has no recorded release (%s)", filepath.Join(dir, releaseFile))
	case flag == "":
		return file, nil
	case file == "" || file == flag:
		return flag, nil
	case semver.Compare(file, flag) > 0:
		log.printf("using release %s recorded by a past self-upgrade (%s), not --release %s", file, filepath.Join(dir, releaseFile), flag)
		return file, nil
	default:
		return flag, nil
	}
}
