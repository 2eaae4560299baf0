package httpapi

import (
	"context"
	"io"
	"net/http"
	"time"

	"stratum/apierr"
	"stratum/iam"
	"stratum/release"
	"stratum/release/repo"
	"stratum/wire"
)

// ReleaseCatalog imports and lists the releases the founder serves
// (repo.Service).
type ReleaseCatalog interface {
	// Import verifies and imports the release tree at a path on the
	// founder's own file system.
	Import(ctx context.Context, src string, opts repo.ImportOptions) (*release.Manifest, error)
	// ImportTar verifies and imports a release tree sent as a tar
	// stream (the manifest's signature checked before anything else is
	// received).
	ImportTar(ctx context.Context, r io.Reader, opts repo.ImportOptions) (*release.Manifest, error)
	List() ([]wire.ImportedRelease, error)
	Get(release string) (*wire.ImportedRelease, error)
	// ListKeys lists the key files of the founder's release keys;
	// TrustKey trusts a public key under a file name.
	ListKeys() ([]wire.ReleaseKey, error)
	TrustKey(name string, publicKey []byte, actor string) (wire.ReleaseKey, error)
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

// uploadRelease takes a signed release tree as a tar stream from the
// operator's machine (stratum release push).
func (a *API) uploadRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var replace bool
	switch v := r.URL.Query().Get("replace"); v {
	case "", "false":
	case "true":
		replace = true
	default:
		return apierr.WithFields(apierr.InvalidInput, "replace is true or false", []apierr.FieldError{{Field: "replace", Message: "true or false"}})
	}
	// A large tree takes longer than the listener's read timeout: the
	// deadline moves on with every read, so only a stalled sender is cut.
	body := &deadlineReader{r: r.Body, rc: http.NewResponseController(w)}
	m, err := a.Releases.ImportTar(context.WithoutCancel(r.Context()), body, repo.ImportOptions{Actor: c.principal.Subject, Replace: replace})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"release": m.Release, "files": len(m.Files), "bytes": m.TotalSize(), "upgradesFrom": m.UpgradesFrom})
	return nil
}

// uploadIdle is how long an upload may send nothing.
const uploadIdle = 30 * time.Second

type deadlineReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	_ = d.rc.SetReadDeadline(time.Now().Add(uploadIdle))
	return d.r.Read(p)
}

func (a *API) getRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	im, err := a.Releases.Get(c.params.ByName("release"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, im)
	return nil
}

func (a *API) listReleases(w http.ResponseWriter, r *http.Request, c *call) error {
	out, err := a.Releases.List()
	if err != nil {
		return err
	}
	out = iam.Visible(c.principal, out, c.action, func(im wire.ImportedRelease) string { return iam.Resource(iam.ResRelease, im.Release) })
	writeJSON(w, http.StatusOK, map[string]any{"releases": out})
	return nil
}

func (a *API) listReleaseKeys(w http.ResponseWriter, r *http.Request, c *call) error {
	keys, err := a.Releases.ListKeys()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ReleaseKeys{Keys: keys})
	return nil
}

func (a *API) trustReleaseKey(w http.ResponseWriter, r *http.Request, c *call) error {
	var req wire.TrustReleaseKey
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	k, err := a.Releases.TrustKey(req.Name, []byte(req.PublicKey), c.principal.Subject)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, k)
	return nil
}
