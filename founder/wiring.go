package founder

import (
	"context"
	"fmt"
	"time"

	"stratum/cluster"
	"stratum/httpapi"
	"stratum/iam"
	"stratum/join"
	"stratum/release/repo"
	"stratum/releaseset"
	"stratum/store"
	"stratum/wire"
)

// selfRecordEvery is how often the founder records its own release; well
// inside the release set's ten-minute staleness window.
const selfRecordEvery = 3 * time.Minute

// services builds the domain services once the store is open.
func (f *Founder) services(ctx context.Context) error {
	cp := wire.ControlPlane{Version: f.opts.Build.Version, Commit: f.opts.Build.Commit}
	// This build's newest migration, the oldest level whose control plane
	// still runs against it, and the level the store actually has.
	level, compat, db := store.SchemaVersion(), store.CompatSchemaVersion(), f.db.Schema()
	cp.SchemaLevel, cp.CompatSchemaLevel, cp.DatabaseSchemaLevel = &level, &compat, &db
	var err error
	if f.iam, err = iam.New(iam.Config{DB: f.db, Now: time.Now, PasswordChanged: f.bootstrapPasswordChanged}); err != nil {
		return err
	}
	if f.repo, err = repo.New(repo.Config{DB: f.db, DataDir: string(f.opts.Data), KeysDir: f.opts.Data.ReleaseKeys(),
		Concurrency: f.opts.ReleaseConcurrency, Limits: f.opts.ReleaseReads, CacheBytes: f.opts.ReleaseCacheBytes,
		UploadLimits: uploadLimits(f.opts.ReleaseUploadBytes), Log: f.log}); err != nil {
		return err
	}
	// SPEC 16.2: the key files a data directory held before this build
	// are trusted once; later ones only through stratum release trust-key.
	if err := f.repo.AdoptKeys(); err != nil {
		return fmt.Errorf("adopting the release keys: %w", err)
	}
	if err := f.repo.Recover(); err != nil {
		f.log.Error("settling an interrupted release import failed", "err", err)
	}
	f.startup.Phase("release index")
	if err := f.repo.UpgradeIndexes(ctx); err != nil {
		f.log.Error("indexing the sub-chunks of imported releases failed; files without one are verified by 1 MiB chunk", "err", err)
	}
	if f.releases, err = releaseset.New(releaseset.Config{DB: f.db, Now: time.Now, Node: f.id.FounderNodeID, ControlPlane: cp, Held: f.repo.Held}); err != nil {
		return err
	}
	var payloads join.PayloadOfferer = f.repo
	if f.opts.ReleaseSource != "" {
		// A configured mirror serves the release; the founder does not.
		payloads = nil
	}
	f.members = &cluster.Decoded{}
	f.joins, err = join.New(join.Config{
		DB: f.db, Now: time.Now, JoinAddr: f.opts.JoinAdvertise, JoinCommandNamesRelease: f.opts.Dev, CAPin: f.ca.Pin(),
		Payloads: payloads, MirrorURL: f.opts.ReleaseSource,
		DeliveryTimeout: f.opts.DeliveryTimeout, Logger: f.log, Boot: f.bootHealth(),
		Dev: f.opts.Dev, FounderAddrs: hostAddrs(), OpenBao: f.joinOpenBao(), ControlPlane: &cp,
		EKPool: f.opts.EKPool, Decoded: f.members,
	})
	return err
}

// storeHealth is the store as /healthz and /version see it.
type storeHealth struct{ db *store.DB }

// Ping fails when the store does not answer a read.
func (h storeHealth) Ping() error { return h.db.View(func(*store.Tx) error { return nil }) }

func (h storeHealth) Schema() int { return h.db.Schema() }

// releaseFiles is what the join listener serves release files from: the
// founder's mirror, or nothing when a configured mirror serves them.
func (f *Founder) releaseFiles() httpapi.ReleaseFiles {
	if f.opts.ReleaseSource != "" {
		return nil
	}
	return f.repo
}

// runningRelease is the release set's running release (what the nodes
// report), for /version.
func (f *Founder) runningRelease() string {
	var r string
	_ = f.db.View(func(tx *store.Tx) error {
		var err error
		r, err = f.releases.RunningReleaseTx(tx)
		return err
	})
	return r
}

// admissionRelease is the release joiners are admitted on (SPEC 10.2).
func (f *Founder) admissionRelease() string {
	var r string
	_ = f.db.View(func(tx *store.Tx) error {
		var err error
		r, err = cluster.AdmissionRelease(tx)
		return err
	})
	return r
}

// startBackground starts the founder's background loops.
func (f *Founder) startBackground(ctx context.Context) {
	go func() {
		// SPEC 18: every catalogued file against its index, once per start.
		if err := f.repo.Recheck(ctx); err != nil && ctx.Err() == nil {
			f.log.Error("checking the release files failed", "err", err)
		}
	}()
	f.schedule(ctx, f.loops()...)
}

// recordOwnRelease records what the founder runs at start and then every
// few minutes, so the release set never shows it stale.
func (f *Founder) recordOwnRelease(ctx context.Context) {
	rec := f.hostRecord(ctx)
	// The founder runs what it admits joiners on: once the operator sets
	// a new admission release, the founder's record follows.
	req := wire.RecordRequest{RunningRelease: f.admissionRelease(), Release: rec}
	if err := f.releases.Record(releaseset.FounderActor, f.id.FounderNodeID, req); err != nil {
		f.log.Warn("recording the founder's own release failed", "err", err)
	}
}

// beforeShutdown releases long-polls so Shutdown does not wait on them.
// In-flight release reads are cut by the mirror's Close.
func (f *Founder) beforeShutdown() {
	f.joins.Close()
	f.repo.Close()
}

// collectOrphanedContent removes, on the replica holding the lease of a
// shared store, the release content of imports killed before their
// commit (SPEC 18): at start and every few minutes.
func (f *Founder) collectOrphanedContent(context.Context) {
	removed, err := f.repo.CollectOrphans(repo.OrphanIdle)
	if err != nil {
		f.log.Warn("collecting the content of killed imports failed", "err", err)
	} else if len(removed) > 0 {
		f.log.Info("removed the content of imports killed before their commit", "imports", removed)
	}
}

// purgeSessions deletes expired login tokens every hour, so a founder that
// runs for years keeps only live sessions in its store.
func (f *Founder) purgeSessions(context.Context) {
	if err := f.iam.PurgeExpiredSessions(); err != nil {
		f.log.Warn("purging expired sessions failed", "err", err)
	}
}
