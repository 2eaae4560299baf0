package repo

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"stratum/apierr"
	"stratum/release"
	"stratum/store"
	"stratum/wire"
)

// Config is what the founder's release repository is built from.
type Config struct {
	DB      *store.DB
	DataDir string // the founder's data directory; releases live in DataDir/releases
	// KeysDir holds the trusted release keys (DataDir/release-keys when
	// empty); Threshold is how many signatures a release needs (1 when
	// zero).
	KeysDir   string
	Threshold int
	// Keys, when set, are the trusted keys instead (a test's); else they
	// are read from KeysDir at each import, each counting only once
	// trusted (keys.go: adopted, or trusted by TrustKey).
	Keys *release.Keyring
	// Concurrency is how many files are read at once across all joiners
	// (<= 0: DefaultConcurrency).
	Concurrency int
	Limits      ReadLimits
	// CacheBytes bounds the cache of verified chunks shared by all
	// readers (0: DefaultCacheBytes(); < 0: no cache).
	CacheBytes int64
	// UploadLimits bound ImportTar (zero: DefaultUploadLimits).
	UploadLimits UploadLimits
	Log          *slog.Logger
}

// Service is the founder's release repository over one data directory:
// imports, the catalog, crash recovery, the start-up check, and (its
// embedded Mirror) the reads that serve joiners.
type Service struct {
	*Mirror
	cfg    Config
	checks *Checks
	// keysMu serializes adoption and trusting of keys (keys.go);
	// untrusted holds the ids of untrusted key files reported.
	keysMu    sync.Mutex
	untrusted sync.Map
}

// New builds the repository; it starts nothing (Recover, UpgradeIndexes
// and Recheck are the founder's to run).
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.DataDir == "" {
		return nil, errors.New("repo: a store and a data directory are needed")
	}
	if cfg.KeysDir == "" {
		cfg.KeysDir = filepath.Join(cfg.DataDir, "release-keys")
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = 1
	}
	if cfg.UploadLimits.MaxBytes == 0 {
		cfg.UploadLimits = DefaultUploadLimits
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	checks := newChecks()
	m := newMirror(mirrorConfig{DB: cfg.DB, DataDir: cfg.DataDir, Concurrency: cfg.Concurrency, Limits: cfg.Limits,
		CacheBytes: cfg.CacheBytes, Log: cfg.Log, Checks: checks})
	return &Service{Mirror: m, cfg: cfg, checks: checks}, nil
}

// Import imports the signed release tree at src (see importTree).
func (s *Service) Import(ctx context.Context, src string, opts ImportOptions) (*release.Manifest, error) {
	keys, err := s.keyring()
	if err != nil {
		return nil, err
	}
	return importTree(ctx, s.cfg.DB, s.cfg.DataDir, src, keys, opts)
}

// ImportTar imports the signed release tree sent as the tar stream r
// (see importTar).
func (s *Service) ImportTar(ctx context.Context, r io.Reader, opts ImportOptions) (*release.Manifest, error) {
	keys, err := s.keyring()
	if err != nil {
		return nil, err
	}
	return importTar(ctx, s.cfg.DB, s.cfg.DataDir, r, keys, s.cfg.UploadLimits, opts)
}

// List returns the imported releases (see listReleases).
func (s *Service) List() ([]wire.ImportedRelease, error) { return listReleases(s.cfg.DB, s.checks) }

// ListStopped returns the imported releases of a stopped founder, each
// file checked against its index (see listStopped).
func (s *Service) ListStopped() ([]wire.ImportedRelease, error) {
	return listStopped(s.cfg.DB, s.cfg.DataDir)
}

// Get returns one imported release; NOT_FOUND when there is none.
func (s *Service) Get(release string) (*wire.ImportedRelease, error) {
	r, found, err := getRelease(s.cfg.DB, release, s.checks)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, apierr.New(apierr.NotFound, "release %s is not imported", release)
	}
	return r, nil
}

// Held lists, in tx, the releases the founder holds (see held).
func (s *Service) Held(tx *store.Tx) ([]string, error) { return held(tx) }

// Recover settles an import interrupted by a crash (see recoverImports).
func (s *Service) Recover() error { return recoverImports(s.cfg.DB, s.cfg.DataDir) }

// UpgradeIndexes indexes the sub-chunks of releases imported without
// them (see upgradeIndexes).
func (s *Service) UpgradeIndexes(ctx context.Context) error {
	return upgradeIndexes(ctx, s.cfg.DB, s.cfg.DataDir, s.cfg.Log)
}

// Recheck checks every catalogued file against its index, once (see
// recheck).
func (s *Service) Recheck(ctx context.Context) error {
	return recheck(ctx, s.cfg.DB, s.cfg.DataDir, s.checks, s.cfg.Log)
}

// CollectOrphans removes the content of imports killed before their
// commit, idle for at least idle (see collectOrphans).
func (s *Service) CollectOrphans(idle time.Duration) ([]string, error) {
	return collectOrphans(s.cfg.DB, idle)
}
