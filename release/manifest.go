package release

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"stratum/apierr"
	"stratum/semver"
	"stratum/strictjson"
)

// The two payload files are the only files of a release tree that the
// manifest does not list: one is the manifest, the other signs it.
const (
	ManifestPath  = "payload/manifest.json"
	SignaturePath = "payload/manifest.sig"
)

// SchemaVersion is the manifest schema this package reads and writes.
const SchemaVersion = 1

// maxManifestFiles bounds the work a hostile but validly signed manifest
// can ask for.
const maxManifestFiles = 1 << 20

// Manifest is payload/manifest.json (SPEC 5.1).
type Manifest struct {
	SchemaVersion int       `json:"schemaVersion"`
	Release       string    `json:"release"`
	CreatedAt     time.Time `json:"createdAt"`
	UpgradesFrom  []string  `json:"upgradesFrom"`
	OS            OSImage   `json:"os"`
	Files         []File    `json:"files"`
	Sysext        []Sysext  `json:"sysext"`
}

// OSImage names the OS image a release carries.
type OSImage struct {
	ImageVersion string `json:"imageVersion"`
	Layout       string `json:"layout"`
}

// File is one file of the release tree.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Sysext is one systemd system extension image of the release.
type Sysext struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Path     string `json:"path"`
	RootHash string `json:"rootHash"`
}

// ParseManifest decodes and validates manifest bytes strictly: unknown or
// duplicate fields, another schema version, a release or upgradesFrom that
// is not a semantic version, unclean or duplicate paths, negative sizes and
// malformed hashes are each an error naming the problem and the path.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := decodeDocument(b, &m); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	if m.SchemaVersion != SchemaVersion {
		return fmt.Errorf("schemaVersion %d is not supported (want %d)", m.SchemaVersion, SchemaVersion)
	}
	if err := semver.Valid(m.Release); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if m.CreatedAt.IsZero() {
		return fmt.Errorf("createdAt is missing")
	}
	seenFrom := map[string]bool{}
	for i, v := range m.UpgradesFrom {
		if err := semver.Valid(v); err != nil {
			return fmt.Errorf("upgradesFrom[%d]: %w", i, err)
		}
		if v == m.Release {
			return fmt.Errorf("upgradesFrom[%d]: %s is the release itself", i, v)
		}
		if seenFrom[v] {
			return fmt.Errorf("upgradesFrom[%d]: %s listed twice", i, v)
		}
		seenFrom[v] = true
	}
	if len(m.OS.ImageVersion) > 256 || len(m.OS.Layout) > 256 {
		return fmt.Errorf("os: value longer than 256 bytes")
	}
	if len(m.Files) == 0 {
		return fmt.Errorf("files: the release lists no file")
	}
	if len(m.Files) > maxManifestFiles {
		return fmt.Errorf("files: %d files, more than %d", len(m.Files), maxManifestFiles)
	}
	paths := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if err := ValidPath(f.Path); err != nil {
			return fmt.Errorf("files[%d]: %w", i, err)
		}
		if f.Path == ManifestPath || f.Path == SignaturePath {
			return fmt.Errorf("files[%d]: %s is a payload file and cannot be listed", i, f.Path)
		}
		if paths[f.Path] {
			return fmt.Errorf("files[%d]: %s listed twice", i, f.Path)
		}
		paths[f.Path] = true
		if f.Size < 0 {
			return fmt.Errorf("files[%d]: %s has negative size %d", i, f.Path, f.Size)
		}
		if err := checkHex(f.SHA256, 32); err != nil {
			return fmt.Errorf("files[%d]: %s: sha256: %w", i, f.Path, err)
		}
	}
	// A path that is also a directory of another path cannot exist in a
	// tree; refusing it here keeps the tree walk simple.
	for _, f := range m.Files {
		for i := strings.LastIndexByte(f.Path, '/'); i > 0; i = strings.LastIndexByte(f.Path[:i], '/') {
			if paths[f.Path[:i]] {
				return fmt.Errorf("files: %s is listed both as a file and as a directory of %s", f.Path[:i], f.Path)
			}
		}
	}
	names := map[string]bool{}
	for i, s := range m.Sysext {
		if s.Name == "" || len(s.Name) > maxElemLen {
			return fmt.Errorf("sysext[%d]: name is empty or too long", i)
		}
		if names[s.Name] {
			return fmt.Errorf("sysext[%d]: %s listed twice", i, s.Name)
		}
		names[s.Name] = true
		if s.Version == "" || len(s.Version) > 128 {
			return fmt.Errorf("sysext[%d]: %s: version is empty or too long", i, s.Name)
		}
		if err := ValidPath(s.Path); err != nil {
			return fmt.Errorf("sysext[%d]: %s: %w", i, s.Name, err)
		}
		if !paths[s.Path] {
			return fmt.Errorf("sysext[%d]: %s: path %s is not in files", i, s.Name, s.Path)
		}
		if err := checkHex(s.RootHash, 0); err != nil {
			return fmt.Errorf("sysext[%d]: %s: rootHash: %w", i, s.Name, err)
		}
	}
	return nil
}

// checkHex accepts lowercase hex of n bytes (n == 0: any non-empty even
// length up to 64 bytes), the one spelling Sign writes, so a hash has one
// representation and compares as a string.
func checkHex(s string, n int) error {
	if n > 0 && len(s) != 2*n {
		return fmt.Errorf("%d hex digits, want %d", len(s), 2*n)
	}
	if n == 0 && (s == "" || len(s)%2 != 0 || len(s) > 128) {
		return fmt.Errorf("want an even number (2..128) of hex digits, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%q is not lowercase hex", s)
		}
	}
	return nil
}

// Lookup returns the listed file at path.
func (m *Manifest) Lookup(path string) (File, bool) {
	for _, f := range m.Files {
		if f.Path == path {
			return f, true
		}
	}
	return File{}, false
}

// TotalSize is the sum of the listed files' sizes.
func (m *Manifest) TotalSize() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Marshal returns the manifest as Sign writes it: indented JSON with a
// final newline, empty lists as [] rather than null.
func (m *Manifest) Marshal() ([]byte, error) {
	c := *m
	if c.UpgradesFrom == nil {
		c.UpgradesFrom = []string{}
	}
	if c.Sysext == nil {
		c.Sysext = []Sysext{}
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func hexSum(sum []byte) string { return hex.EncodeToString(sum) }

// decodeDocument decodes a signed JSON document with the one strict
// decoder: a signed document must mean exactly one thing. The error
// names the first problem and its path.
func decodeDocument(b []byte, v any) error {
	err := strictjson.Decode(b, v)
	e, ok := apierr.As(err)
	if !ok || len(e.Fields) == 0 {
		return err
	}
	if f := e.Fields[0]; f.Field != "" {
		return fmt.Errorf("%s: %s", f.Field, f.Message)
	}
	return errors.New(e.Fields[0].Message)
}
