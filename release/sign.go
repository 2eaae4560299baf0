package release

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"stratum/crypto"
	"stratum/semver"
)

// SignResult tells what Sign did.
type SignResult struct {
	Manifest *Manifest
	KeyID    string
	// Signatures is the number of signatures now in manifest.sig.
	Signatures int
	// Rewrote is true when manifest.json was (re)written; the signatures
	// over its previous bytes, if any, were then dropped (Dropped of them).
	Rewrote bool
	Dropped int
}

// Sign builds the manifest of the tree at dir (every regular file but the
// two payload files, with sizes and hashes; sysext entries for
// sysext/*.raw), writes payload/manifest.json and signs it with keyFile
// into payload/manifest.sig. When dir already holds a manifest with the
// same content (all but createdAt), its exact bytes are kept and the
// signature is added to the existing ones, so several keys can sign one
// release in turn; a signer that signs again replaces its own signature.
func Sign(dir, keyFile, release string, upgradesFrom []string) (*SignResult, error) {
	if err := semver.Valid(release); err != nil {
		return nil, fmt.Errorf("--release: %w", err)
	}
	priv, err := LoadPrivateKey(keyFile)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("release tree: %w", err)
	}
	defer root.Close()
	m, err := buildManifest(root, release, upgradesFrom)
	if err != nil {
		return nil, err
	}

	res := &SignResult{Manifest: m, KeyID: KeyID(priv.Public().(ed25519.PublicKey))}
	var sigs Signatures
	mb, oldSigs, err := existingManifest(root, m)
	if err != nil {
		return nil, err
	}
	if mb != nil {
		res.Manifest, _ = ParseManifest(mb) // keeps the original createdAt
		for _, s := range oldSigs {
			if !(s.KeyID == res.KeyID && s.Algorithm == AlgorithmEd25519) {
				sigs.Signatures = append(sigs.Signatures, s)
			}
		}
	} else {
		res.Rewrote = true
		for _, s := range oldSigs {
			if s.KeyID != res.KeyID {
				res.Dropped++
			}
		}
		if mb, err = m.Marshal(); err != nil {
			return nil, err
		}
	}
	sigs.Signatures = append(sigs.Signatures, signManifest(priv, mb))
	if len(sigs.Signatures) > maxSignatures {
		return nil, fmt.Errorf("%s already holds %d signatures", SignaturePath, maxSignatures)
	}
	sb, err := sigs.Marshal()
	if err != nil {
		return nil, err
	}
	res.Signatures = len(sigs.Signatures)

	if err := os.MkdirAll(filepath.Join(dir, "payload"), 0o755); err != nil {
		return nil, err
	}
	if res.Rewrote {
		if err := crypto.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(ManifestPath)), mb, 0o644); err != nil {
			return nil, err
		}
	}
	if err := crypto.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(SignaturePath)), sb, 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// existingManifest returns the bytes of the tree's current manifest when
// its content equals m (nil otherwise), and the signatures found in the
// tree. A missing or unreadable previous manifest or signature file just
// means there is nothing to keep.
func existingManifest(root *os.Root, m *Manifest) ([]byte, []Signature, error) {
	var sigs []Signature
	if sb, err := readSmall(root, SignaturePath, maxSignatureSize); err == nil {
		if s, err := ParseSignatures(sb); err == nil {
			sigs = s.Signatures
		}
	}
	mb, err := readSmall(root, ManifestPath, maxManifestSize)
	if err != nil {
		return nil, sigs, nil
	}
	old, err := ParseManifest(mb)
	if err != nil || !sameContent(old, m) {
		return nil, sigs, nil
	}
	return mb, sigs, nil
}

// sameContent compares what a signature vouches for, leaving out the
// creation time, which a second signer cannot reproduce.
func sameContent(a, b *Manifest) bool {
	x, y := *a, *b
	x.CreatedAt, y.CreatedAt = time.Time{}, time.Time{}
	xb, err1 := x.Marshal()
	yb, err2 := y.Marshal()
	return err1 == nil && err2 == nil && string(xb) == string(yb)
}

func buildManifest(root *os.Root, release string, upgradesFrom []string) (*Manifest, error) {
	from := []string{}
	for _, v := range upgradesFrom {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if err := semver.Valid(v); err != nil {
			return nil, fmt.Errorf("--upgrades-from: %w", err)
		}
		if !slices.Contains(from, v) {
			from = append(from, v)
		}
	}
	paths, err := walkTree(root)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("release tree holds no file to sign")
	}
	// The walk's order puts "a/b" before "a.txt"; the manifest is sorted
	// by the path string so that it is the same whatever produced it.
	slices.Sort(paths)
	m := &Manifest{
		SchemaVersion: SchemaVersion,
		Release:       release,
		CreatedAt:     time.Now().UTC().Truncate(time.Second),
		UpgradesFrom:  from,
		Files:         make([]File, len(paths)),
		Sysext:        []Sysext{},
	}
	for i, p := range paths {
		if err := ValidPath(p); err != nil {
			return nil, badFile(p, "", err.Error())
		}
		m.Files[i].Path = p
	}
	err = forEachParallel(len(paths), func(i int) error {
		f := &m.Files[i]
		st, err := root.Lstat(f.Path)
		if err != nil {
			return badFile(f.Path, "", err.Error())
		}
		sum, err := hashFile(root, f.Path, st.Size())
		if err != nil {
			return badFile(f.Path, "", err.Error())
		}
		f.Size, f.SHA256 = st.Size(), sum
		return nil
	})
	if err != nil {
		return nil, err
	}
	if m.Sysext, err = sysextEntries(root, m); err != nil {
		return nil, err
	}
	m.OS = OSImage{ImageVersion: "v" + release, Layout: osLayout(m)}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// sysextEntries describes each sysext/*.raw image (see the package
// documentation for where name, version and rootHash come from).
func sysextEntries(root *os.Root, m *Manifest) ([]Sysext, error) {
	out := []Sysext{}
	for _, f := range m.Files {
		dir, file := path.Split(f.Path)
		if dir != "sysext/" || !strings.HasSuffix(file, ".raw") || file == ".raw" {
			continue
		}
		base := strings.TrimSuffix(file, ".raw")
		name, version, ok := strings.Cut(base, "_")
		if !ok || name == "" || version == "" {
			name, version = base, m.Release
		}
		s := Sysext{Name: name, Version: version, Path: f.Path, RootHash: f.SHA256}
		sidecar := "sysext/" + base + ".roothash"
		if b, err := readSmall(root, sidecar, 4096); err == nil {
			s.RootHash = strings.TrimSpace(string(b))
			if err := checkHex(s.RootHash, 0); err != nil {
				return nil, badFile(sidecar, "", fmt.Sprintf("root hash: %v", err))
			}
		} else if _, serr := root.Lstat(sidecar); !errors.Is(serr, fs.ErrNotExist) {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func osLayout(m *Manifest) string {
	h := sha256.New()
	for _, f := range m.Files { // sorted by path already
		if strings.HasPrefix(f.Path, "os/") {
			fmt.Fprintf(h, "%s %s\n", f.Path, f.SHA256)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}
