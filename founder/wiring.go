package founder

import (
	"context"

	"stratum/httpapi"
)

// mounts returns the domain routes to add to the API.
func (f *Founder) mounts() []func(*httpapi.API) { return nil }

// clusterRelease is the release the cluster runs.
func (f *Founder) clusterRelease() string { return f.id.ClusterRelease }

// startBackground starts the founder's background loops.
func (f *Founder) startBackground(ctx context.Context) {}

// beforeShutdown releases long-polls so Shutdown does not wait on them.
func (f *Founder) beforeShutdown() {}
