package httpapi

import (
	"context"
	"net/http"

	"github.com/julienschmidt/httprouter"

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

// mountReleaseImport adds the release catalog endpoints.
func (a *API) mountReleaseImport() {
	cat := a.Releases
	a.admin.handle(Route{Method: "POST", Path: "/v1/admin/releases", Summary: "Import a signed release tree from a path on the founder (verified against DIR/release-keys).", Action: "upgrade:ImportRelease", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "upgrade:ImportRelease", iam.Resource(iam.ResRelease, "*"))
			if err != nil {
				return err
			}
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
			m, err := cat.Import(context.WithoutCancel(r.Context()), req.Path, repo.ImportOptions{Actor: p.Subject, Replace: req.Replace})
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusCreated, map[string]any{"release": m.Release, "files": len(m.Files), "upgradesFrom": m.UpgradesFrom})
			return nil
		})
	a.admin.handle(Route{Method: "GET", Path: "/v1/admin/releases", Summary: "List imported releases.", Action: "upgrade:DescribeRelease", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "upgrade:DescribeRelease", iam.Resource(iam.ResRelease, "*"))
			if err != nil {
				return err
			}
			out, err := cat.List()
			if err != nil {
				return err
			}
			out = iam.Visible(p, out, "upgrade:DescribeRelease", func(im repo.Imported) string { return iam.Resource(iam.ResRelease, im.Release) })
			writeJSON(w, http.StatusOK, map[string]any{"releases": out})
			return nil
		})
}
