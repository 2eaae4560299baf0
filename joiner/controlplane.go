package joiner

import (
	"encoding/json"

	"stratum/buildinfo"
	"stratum/wire"
)

// controlPlaneFile is ROOT/etc/stratum/control-plane.json, which the
// agent reports as the record's controlPlane (SPEC 11, 19).
const controlPlaneFile = etcDir + "/control-plane.json"

// controlPlaneJSON is control-plane.json for a node whose role runs a
// control plane, nil for the others. The build is this binary's (the
// node's stratum); the schema levels are the cluster control plane's from
// the bundle, and only when this is the same build (its migrations are
// then the same): otherwise they stay unknown rather than guessed.
func controlPlaneJSON(role string, cluster *wire.ControlPlane, self buildinfo.Info) ([]byte, error) {
	if role != "control-plane" {
		return nil, nil
	}
	cp := wire.ControlPlane{Version: self.Version, Commit: self.Commit}
	if !isCommit(cp.Commit) {
		cp.Commit = wire.CommitUnknown
	}
	if cluster != nil && isCommit(cp.Commit) && cluster.Commit == cp.Commit {
		cp.SchemaLevel, cp.CompatSchemaLevel = cluster.SchemaLevel, cluster.CompatSchemaLevel
	}
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// isCommit: 4 to 64 lowercase hex digits (hostrecord.IsCommit's rule; the
// joiner does not link the record collectors).
func isCommit(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
