package joiner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"stratum/apiclient"
	"stratum/wire"

	"stratum/crypto"
	"stratum/release"
	"stratum/semver"
)

// Payload file size limits: generous next to real ones (the founder's
// verifier uses 64 MiB and 1 MiB), small enough to hold in memory.
const (
	maxManifestSize  = 64 << 20
	maxSignatureSize = 1 << 20
)

// errNotServed is a 404 from the release source: for the founder, the
// registration is no longer in needs-upgrade (rejected meanwhile), or the
// release is gone.
var errNotServed = errors.New("not served")

// source is where release files come from.
type source struct {
	name string // for messages: "the founder" or the mirror URL
	hc   apiclient.Doer
	base string // URL prefix the escaped release path is appended to
}

func (s *source) url(p string) string { return s.base + escapePath(p) }

// releaseSource picks the founder's release endpoint when the upgrade
// names no source, else the mirror. A mirror is an ordinary HTTPS server
// (not issued by the cluster CA, not asking for our key), so it is reached
// with the system roots; it need not be trusted at all, since every byte
// is checked against the signed manifest, which is also why plain http is
// accepted for an air-gapped mirror.
func (j *joiner) releaseSource(joinID string, u *wire.Upgrade) (*source, error) {
	if u.Source == "" {
		return &source{name: "the founder", hc: j.api.HTTP(), base: j.api.Base() + registrationPath(joinID) + "/release/"}, nil
	}
	pu, err := url.Parse(u.Source)
	if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
		return nil, fmt.Errorf("the founder names release source %q, which is not an http(s) URL", u.Source)
	}
	return &source{name: u.Source, hc: j.cfg.mirrorHTTP, base: strings.TrimRight(u.Source, "/") + "/"}, nil
}

// mirrorClient is the client for a release mirror: system roots,
// proxies from the environment, a bound on waiting for headers, and the
// run's TLS session cache (tickets), so that a download retried on a new
// connection resumes.
func mirrorClient(tickets tls.ClientSessionCache) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = time.Minute
	tr.TLSClientConfig = &tls.Config{ClientSessionCache: tickets}
	return &http.Client{Transport: tr}
}

// selfUpgrade handles needs-upgrade (SPEC 7 step 4): fetch and verify the
// release, hand the verified tree to the hook, record the new release and
// register again with it. A hook that reboots the machine leaves the
// verified files in place; the next run re-checks them instead of
// downloading them again and runs the hook again, unless the release file
// (which the hook may write itself, see STRATUM_JOIN_RELEASE_FILE) says
// the machine already runs the new release.
func (j *joiner) selfUpgrade(ctx context.Context, v *view) (*view, error) {
	u := v.Upgrade
	if u == nil || u.To == "" {
		return nil, errors.New("the founder says needs-upgrade but names no release to upgrade to")
	}
	if !j.cfg.SelfUpgrade {
		return nil, fmt.Errorf("the founder asks for a self-upgrade to %s, but --self-upgrade was not given", u.To)
	}
	if err := semver.Valid(u.To); err != nil {
		return nil, fmt.Errorf("the founder offers release %q: %v", u.To, err)
	}
	if u.To == j.release && v.Release != j.release {
		// Upgraded in an earlier run (the hook rebooted, or stopped after
		// writing the release file): only the re-registration is left.
		return j.register(ctx)
	}
	if semver.Compare(u.To, j.release) <= 0 {
		// SPEC 10.4, 16.8: only to a strictly newer release by semver
		// precedence, whatever the founder says: 0.1.0+old is 0.1.0.
		return nil, &DowngradeError{Running: j.release, Offered: u.To}
	}
	tree, err := j.fetchRelease(ctx, v.JoinID, u)
	if errors.Is(err, errNotServed) {
		if cur, gerr := j.get(ctx, v.JoinID, "", 0); gerr == nil && cur.State != wire.StateNeedsUpgrade {
			return cur, nil // rejected meanwhile, say: the main loop reports it
		}
	}
	if err != nil {
		return nil, err
	}
	if err := j.runHook(ctx, tree, u.To); err != nil {
		return nil, err
	}
	if err := writeReleaseFile(j.cfg.StateDir, u.To); err != nil {
		return nil, fmt.Errorf("the upgrade hook succeeded but the release could not be recorded: %w", err)
	}
	j.log.printf("upgraded from %s to %s; registering again with %s", j.release, u.To, u.To)
	j.release = u.To
	removeInstalledRelease(j.cfg.StateDir, u.To, j.log)
	return j.register(ctx)
}

// removeInstalledRelease deletes the tree of a release the hook has
// installed (after it succeeded, or at the next start when the hook
// rebooted the machine): it can be the size of an OS image. A failed
// removal only costs disk, so it is said and not fatal.
func removeInstalledRelease(stateDir, rel string, log *printer) {
	tree := filepath.Join(stateDir, releasesDir, rel)
	if _, err := os.Stat(tree); err != nil {
		return
	}
	if err := os.RemoveAll(tree); err != nil {
		log.printf("could not remove the installed release's files in %s: %v", tree, err)
		return
	}
	log.printf("removed the installed release's files from %s", tree)
}

// fetchRelease downloads and verifies release u.To into
// <state-dir>/releases/<release> and returns that directory. The manifest
// signature is checked before anything it lists is trusted or fetched;
// each file is then downloaded into <state-dir>/downloads/<release> and
// moved into the tree only once its SHA-256 matches the manifest, so the
// tree holds the two payload files and verified files, nothing else.
func (j *joiner) fetchRelease(ctx context.Context, joinID string, u *wire.Upgrade) (string, error) {
	src, err := j.releaseSource(joinID, u)
	if err != nil {
		return "", err
	}
	j.log.printf("fetching release %s from %s", u.To, src.name)
	mb, err := j.fetchSmall(ctx, src, release.ManifestPath, maxManifestSize)
	if err != nil {
		return "", err
	}
	sb, err := j.fetchSmall(ctx, src, release.SignaturePath, maxSignatureSize)
	if err != nil {
		return "", err
	}
	m, err := j.keys.VerifyManifest(mb, sb)
	if err != nil {
		return "", fmt.Errorf("release %s from %s is refused: %w (trusted keys in %s: %s)", u.To, src.name, err, j.cfg.ReleaseKeys, strings.Join(j.keys.KeyIDs(), ", "))
	}
	if m.Release != u.To {
		return "", fmt.Errorf("the signed manifest from %s is of release %s, not %s as offered: refused", src.name, m.Release, u.To)
	}
	if len(m.UpgradesFrom) > 0 && !slices.Contains(m.UpgradesFrom, j.release) {
		return "", &DowngradeError{Running: j.release, Offered: m.Release, UpgradesFrom: m.UpgradesFrom}
	}
	j.log.printf("manifest of release %s verified: %d files, %s", m.Release, len(m.Files), HumanBytes(m.TotalSize()))

	tree := filepath.Join(j.cfg.StateDir, releasesDir, m.Release)
	dl := filepath.Join(j.cfg.StateDir, downloadDir, m.Release)
	for _, d := range []string{tree, dl} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := j.pruneTree(tree, m); err != nil {
		return "", err
	}
	for p, data := range map[string][]byte{release.ManifestPath: mb, release.SignaturePath: sb} {
		dst := filepath.Join(tree, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := crypto.WriteFileAtomic(dst, data, 0o644); err != nil {
			return "", err
		}
	}
	prog := newProgress(j.log, j.cfg.Out, m.TotalSize(), len(m.Files), "release "+m.Release)
	for _, f := range m.Files {
		if err := j.fetchFile(ctx, src, m.Release, f, tree, dl, prog); err != nil {
			prog.stop()
			return "", err
		}
	}
	prog.stop()
	_ = os.RemoveAll(dl)
	j.log.printf("release %s downloaded and verified in %s", m.Release, tree)
	return tree, nil
}

// fetchSmall GETs a payload file whole into memory.
func (j *joiner) fetchSmall(ctx context.Context, src *source, p string, limit int64) ([]byte, error) {
	var data []byte
	err := j.retryRelease(ctx, "fetching "+p, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(actx, http.MethodGet, src.url(p), nil)
		if err != nil {
			return err
		}
		resp, err := src.hc.Do(req)
		if err != nil {
			return networkError(ctx, err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%s does not serve %s of this release: %w", src.name, p, errNotServed)
		case resp.StatusCode != http.StatusOK:
			return apiclient.ResponseError(resp)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return networkError(ctx, err)
		}
		if int64(len(b)) > limit {
			return fmt.Errorf("%s from %s is over %s: refused", p, src.name, HumanBytes(limit))
		}
		data = b
		return nil
	})
	return data, err
}

// pruneTree removes from a tree left by an earlier run whatever the
// verified manifest does not list (an older manifest of the same release
// number, a stray file), and anything that is not a regular file, so the
// hook sees exactly this release.
func (j *joiner) pruneTree(tree string, m *release.Manifest) error {
	listed := make(map[string]bool, len(m.Files)+2)
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	listed[release.ManifestPath], listed[release.SignaturePath] = true, true
	return filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(tree, p)
		if err != nil {
			return err
		}
		if listed[filepath.ToSlash(rel)] && d.Type().IsRegular() {
			return nil
		}
		j.log.printf("removing %s from %s: not part of release %s", filepath.ToSlash(rel), tree, m.Release)
		return os.Remove(p)
	})
}
