package httpapi

import (
	"context"
	"net/http"

	"stratum/apierr"
	"stratum/iam"
	"stratum/release"
	"stratum/release/repo"
)

// ReleaseCatalog imports and lists the releases the founder serves
// (repo.Catalog).
type ReleaseCatalog interface {
	// Import verifies and imports the release tree at a path on the
	// founder's own file system.
	Import(ctx context.Context, src string, opts repo.ImportOptions) (*release.Manifest, error)
	List() ([]repo.Imported, error)
}

type importRequest struct {
	Path string `json:"path"`
	// Replace allows replacing an imported release of the same version
	// whose content differs (audited).
	Replace bool `json:"replace"`
}

func (a *API) importRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req importRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return apierr.WithFields(apierr.InvalidInput, "the release tree's path is required", []apierr.FieldError{{Field: "path", Message: "required"}})
	}
	// The import runs to its end (or failure) even when the client
	// goes away: a half import is cleaned up by the domain, never
	// left for the next one.
	m, err := a.Releases.Import(context.WithoutCancel(r.Context()), req.Path, repo.ImportOptions{Actor: c.principal.Subject, Replace: req.Replace})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"release": m.Release, "files": len(m.Files), "upgradesFrom": m.UpgradesFrom})
	return nil
}

func (a *API) listReleases(w http.ResponseWriter, r *http.Request, c *call) error {
	out, err := a.Releases.List()
	if err != nil {
		return err
	}
	out = iam.Visible(c.principal, out, c.action, func(im repo.Imported) string { return iam.Resource(iam.ResRelease, im.Release) })
	writeJSON(w, http.StatusOK, map[string]any{"releases": out})
	return nil
}
