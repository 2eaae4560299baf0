package founder

import (
	"context"
	"time"

	"stratum/httpapi"
	"stratum/releaseset"
	"stratum/store"
)

// selfRecordEvery is how often the founder records its own release; well
// inside the release set's ten-minute staleness window.
const selfRecordEvery = 3 * time.Minute

// services builds the domain services once the store is open.
func (f *Founder) services() {
	cp := releaseset.ControlPlane{Version: f.opts.Build.Version, Commit: f.opts.Build.Commit}
	schema := f.db.Schema()
	cp.SchemaLevel = &schema
	f.releases = &releaseset.Service{DB: f.db, Now: time.Now, Node: f.id.FounderNodeID, ControlPlane: cp}
}

// mounts returns the domain routes to add to the API.
func (f *Founder) mounts() []func(*httpapi.API) {
	return []func(*httpapi.API){httpapi.MountReleaseSet(f.releases)}
}

// clusterReleaseTx is the release the cluster runs: the release set's
// running release (its oldest node's), else the configured one.
func (f *Founder) clusterReleaseTx(tx *store.Tx) (string, error) {
	r, err := f.releases.RunningReleaseTx(tx)
	if err != nil || r != "" {
		return r, err
	}
	return f.id.ClusterRelease, nil
}

func (f *Founder) clusterRelease() string {
	var r string
	_ = f.db.View(func(tx *store.Tx) error {
		var err error
		r, err = f.clusterReleaseTx(tx)
		return err
	})
	return r
}

// startBackground starts the founder's background loops.
func (f *Founder) startBackground(ctx context.Context) {
	go f.recordOwnRelease(ctx)
}

// recordOwnRelease records what the founder runs at start and then every
// few minutes, so the release set never shows it stale.
func (f *Founder) recordOwnRelease(ctx context.Context) {
	t := time.NewTicker(selfRecordEvery)
	defer t.Stop()
	for {
		rec := hostRecord(f.releases.ControlPlane)
		now := time.Now().UTC()
		rec.HostReportedAt = &now
		req := releaseset.RecordRequest{RunningRelease: f.id.ClusterRelease, Release: rec}
		if err := f.releases.Record("founder", f.id.FounderNodeID, req); err != nil {
			f.log.Warn("recording the founder's own release failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beforeShutdown releases long-polls so Shutdown does not wait on them.
func (f *Founder) beforeShutdown() {}
