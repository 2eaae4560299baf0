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
	"stratum/osrelease"
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
	// Delivered is set before the first file of JoinID's delivery is
	// written under --root, so a join the founder ends failed or
	// rejected has its delivery removed, also by a later run.
	Delivered bool `json:"delivered,omitempty"`
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

// hostReleaseFile is where an OS image built for stratum names its
// release, relative to --root. It is read before os-release's
// IMAGE_VERSION: only a stratum image ships it, while any image-mode OS
// may set IMAGE_VERSION to a version of its own.
const hostReleaseFile = "usr/lib/stratum/release"

// hostRelease is the release the machine under root says it runs, and
// where it says so; "" when it says nothing usable.
func hostRelease(root string, log *printer) (release, source string, err error) {
	path := filepath.Join(root, hostReleaseFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		v := strings.TrimSpace(string(b))
		if err := semver.Valid(v); err != nil {
			return "", "", fmt.Errorf("%s holds %q: %v", path, v, err)
		}
		return v, path, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("host release: %w", err)
	}
	osr, err := osrelease.Read(root)
	if err != nil {
		return "", "", fmt.Errorf("os-release: %w", err)
	}
	v, ok := osr["IMAGE_VERSION"]
	if !ok {
		return "", "", nil
	}
	if semver.Valid(v) != nil {
		log.printf("note: IMAGE_VERSION %q in %s is not a release version: not taken as this machine's release", v, filepath.Join(root, "etc/os-release"))
		return "", "", nil
	}
	return v, "IMAGE_VERSION in " + filepath.Join(root, "etc/os-release"), nil
}

// resolveRelease is the release to register with, known the way a node
// knows it: --release, else the release a previous run recorded in the
// state dir, else the host's own (hostRelease). "" means nothing says.
//
// A recorded release newer than --release wins: a node's unit file keeps
// the --release of the image it was installed from, and registering with
// that after a self-upgrade would offer the same upgrade again forever.
// Without --release, the newer of the recorded and the host's wins: the
// recorded one is newer after a self-upgrade whose reboot is still to come,
// the host's after the OS was upgraded by other means.
func resolveRelease(flag, stateDir, root string, log *printer) (string, error) {
	file, err := readReleaseFile(stateDir)
	if err != nil {
		return "", err
	}
	recorded := filepath.Join(stateDir, releaseFile)
	if flag != "" {
		if err := semver.Valid(flag); err != nil {
			return "", fmt.Errorf("--release %q: %v", flag, err)
		}
		if file != "" && semver.Compare(file, flag) > 0 {
			log.printf("using release %s recorded by a past self-upgrade (%s), not --release %s", file, recorded, flag)
			return file, nil
		}
		return flag, nil
	}
	host, source, err := hostRelease(root, log)
	if err != nil {
		return "", err
	}
	switch {
	case file == "" && host == "":
		return "", nil
	case host == "" || (file != "" && semver.Compare(file, host) >= 0):
		log.printf("release %s, recorded by a previous run (%s)", file, recorded)
		return file, nil
	default:
		log.printf("release %s, from %s", host, source)
		return host, nil
	}
}

// releaseUnknown is the error of a machine that cannot say which release
// it runs. example is the cluster's admission release when the founder
// told it, so the one flag to add is shown as it must be typed.
func releaseUnknown(stateDir, root, example string) error {
	where := fmt.Sprintf("no release recorded in %s, no %s, no IMAGE_VERSION in %s",
		filepath.Join(stateDir, releaseFile), filepath.Join(root, hostReleaseFile), filepath.Join(root, "etc/os-release"))
	if example == "" {
		return fmt.Errorf("this machine does not say which release it runs (%s): give it with --release VERSION", where)
	}
	return fmt.Errorf("this machine does not say which release it runs (%s): give it with --release, e.g. --release %s, the release the cluster admits (an older one also needs --self-upgrade)", where, example)
}
