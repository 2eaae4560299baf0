package founder

import (
	"context"

	"stratum/apierr"
	"stratum/release"
)

// releaseCatalog imports releases into the founder's data directory.
type releaseCatalog struct{ f *Founder }

func (c releaseCatalog) Import(ctx context.Context, actor, path string) (any, error) {
	keys, err := release.LoadKeyring(c.f.opts.Data.ReleaseKeys(), 1)
	if err != nil {
		return nil, apierr.New(apierr.Conflict, "the founder's release keys (%s) cannot be loaded: %v", c.f.opts.Data.ReleaseKeys(), err)
	}
	m, err := release.ImportContext(ctx, c.f.db, string(c.f.opts.Data), path, keys, nil, actor)
	if err != nil {
		if _, ok := apierr.As(err); ok {
			return nil, err
		}
		if release.IsIOError(err) {
			// The founder's disk, not the release: INTERNAL, logged with
			// the request id, no path in the answer.
			return nil, err
		}
		// Verification failures name the file and why: that is the answer
		// the operator needs, and it holds no secret.
		return nil, apierr.New(apierr.InvalidInput, "release not imported: %v", err)
	}
	return map[string]any{"release": m.Release, "files": len(m.Files), "upgradesFrom": m.UpgradesFrom}, nil
}

func (c releaseCatalog) List() (any, error) { return release.List(c.f.db) }
