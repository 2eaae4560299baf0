package joiner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"stratum/agent/unit"
	"stratum/wire"
)

// discardDelivery removes from --root what the delivery of join joinID
// wrote, once the founder ended it state, failed or rejected (a delivery
// timeout, a cancel, a failure reported from here): the leaf of a join
// that did not happen, and a control-plane node's cluster secrets, have
// no business on this disk. A founder's answer carrying the delivery can
// arrive after the founder gave up on the join (a link back after the
// delivery timeout), so it is not enough never to ask: what was written
// goes. It does nothing unless the state dir says a delivery of this very
// join was written (or was being written). What cannot be removed is
// said, by path, for a person to remove.
func (j *joiner) discardDelivery(joinID, state string) {
	if !j.st.Delivered || j.st.JoinID != joinID || (state != wire.StateFailed && state != wire.StateRejected) {
		return
	}
	root := j.cfg.Root
	paths := []string{filepath.Join(root, secretsDir, unsealSealedFile), filepath.Join(root, secretsDir, unsealPlainFile)}
	for _, f := range deliveryFiles("", nil, &wire.Bundle{}, nil, nil, nil, "") {
		paths = append(paths, filepath.Join(root, filepath.FromSlash(f.rel)))
	}
	if j.cfg.InstallAgent {
		paths = append(paths, agentUnitFiles(root)...)
		// An agent installAgent started from the unit would run on,
		// failing, without its leaf: it is stopped before its files go.
		if j.cfg.systemd.manages(root) && j.systemctl(context.Background(), []string{"stop", "--no-block", unit.Name}) {
			defer j.systemctl(context.Background(), []string{"daemon-reload"})
			j.log.printf("join %s ended %s: stopped %s", joinID, state, unit.Name)
		}
	}
	var removed, failed []string
	for _, p := range paths {
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = append(removed, strings.TrimPrefix(p, root+string(filepath.Separator)))
		case !errors.Is(err, fs.ErrNotExist):
			failed = append(failed, err.Error())
		}
	}
	j.log.printf("join %s ended %s: removed its delivery from %s (%d files: %s)", joinID, state, root, len(removed), strings.Join(removed, ", "))
	for _, msg := range failed {
		j.log.printf("WARNING: could not remove a file of the delivery of a join that did not happen: %s: remove it by hand", msg)
	}
	if len(failed) == 0 {
		j.st.Delivered = false
		_ = j.st.save(j.cfg.StateDir)
	}
}

// agentUnitFiles are what installAgent writes under root: the unit, its
// environment file and its enablement link.
func agentUnitFiles(root string) []string {
	return []string{
		filepath.Join(root, wantsDir, unit.Name),
		filepath.Join(root, unitDir, unit.Name),
		filepath.Join(root, strings.TrimPrefix(unit.EnvFile, "/")),
	}
}
