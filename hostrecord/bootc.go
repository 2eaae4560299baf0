package hostrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"stratum/wire"
)

// bootcStatus is what the record reads of `bootc status --format=json`
// (a BootcHost object). Everything else bootc prints is ignored: its
// format is not declared stable, so only these names are relied on.
type bootcStatus struct {
	Kind   string `json:"kind"`
	Status *struct {
		Booted   *bootcEntry `json:"booted"`
		Staged   *bootcEntry `json:"staged"`
		Rollback *bootcEntry `json:"rollback"`
	} `json:"status"`
}

type bootcEntry struct {
	Image *struct {
		Image *struct {
			Image     string `json:"image"`
			Transport string `json:"transport"`
		} `json:"image"`
		Version      string     `json:"version"`
		Timestamp    *time.Time `json:"timestamp"`
		ImageDigest  string     `json:"imageDigest"`
		Architecture string     `json:"architecture"`
	} `json:"image"`
	SoftRebootCapable *bool `json:"softRebootCapable"`
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// parseBootc reads bootc's status. A host bootc does not manage (booted
// null) gives nil and false; an entry without a container image (a plain
// ostree deployment) is left out, since a deployment is named by its
// image digest.
func parseBootc(out []byte) (*wire.Bootc, bool, error) {
	var st bootcStatus
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, false, fmt.Errorf("bootc status output is not JSON: %v", err)
	}
	if st.Kind != "BootcHost" || st.Status == nil {
		return nil, false, errors.New("bootc status output is not a BootcHost object")
	}
	var b wire.Bootc
	var err error
	if b.Booted, err = st.Status.Booted.deployment("booted"); err != nil {
		return nil, false, err
	}
	if b.Staged, err = st.Status.Staged.deployment("staged"); err != nil {
		return nil, false, err
	}
	if b.Rollback, err = st.Status.Rollback.deployment("rollback"); err != nil {
		return nil, false, err
	}
	if b.Booted == nil && b.Staged == nil && b.Rollback == nil {
		return nil, false, nil
	}
	return &b, b.Booted != nil, nil
}

func (e *bootcEntry) deployment(which string) (*wire.Deployment, error) {
	if e == nil || e.Image == nil || e.Image.Image == nil {
		return nil, nil
	}
	if !digestRE.MatchString(e.Image.ImageDigest) {
		return nil, fmt.Errorf("bootc status: %s deployment has digest %q, not sha256:<64 hex>", which, e.Image.ImageDigest)
	}
	d := &wire.Deployment{Image: e.Image.Image.Image, Transport: e.Image.Image.Transport,
		Digest: e.Image.ImageDigest, Version: e.Image.Version, Architecture: e.Image.Architecture,
		SoftRebootCapable: e.SoftRebootCapable}
	if e.Image.Timestamp != nil {
		t := e.Image.Timestamp.UTC()
		d.Timestamp = &t
	}
	return d, nil
}

// collectBootc fills imageMode and bootc. Without bootc, or when its
// output cannot be read, imageMode comes from the marker ostree leaves
// on an image-mode boot (a fact, not a guess) and bootc stays absent.
func collectBootc(ctx context.Context, h *Host, rec *wire.Record) error {
	out, err := h.Run.Run(ctx, "bootc", "status", "--format=json")
	if err == nil {
		b, imageMode, perr := parseBootc(out)
		if perr == nil {
			rec.Bootc, rec.ImageMode = b, imageMode
			return nil
		}
		err = perr
	}
	rec.ImageMode = ostreeBooted(h.Root)
	if errors.Is(err, ErrMissing) {
		return nil
	}
	return err
}

func ostreeBooted(root string) bool {
	_, err := os.Stat(filepath.Join(root, "run/ostree-booted"))
	return err == nil
}
