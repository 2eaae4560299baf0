package joiner

import (
	"context"
	"net/http"
	"time"

	"stratum/wire"

	"stratum/apierr"
)

// probeRelease is the release a registration names to learn the cluster's
// admission release: the lowest version there is, which no cluster runs,
// sent without selfUpgrade, so the founder refuses it (409
// RELEASE_MISMATCH, its details naming clusterRelease) and, as with every
// refused request, records nothing and spends no token use.
const probeRelease = "0.0.0-0"

// releaseUnknown ends a run on a machine that cannot say which release it
// runs, with the flag to add and, when the founder tells it to this token,
// the cluster's admission release as its example.
func (j *joiner) releaseUnknown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req := wire.RegisterRequest{Token: j.cfg.Token, Release: probeRelease, Hostname: j.cfg.Hostname, MgmtIP: j.cfg.MgmtIP,
		MachineID: machineID(j.cfg.Root, j.id.Fingerprint)}
	_, err := j.call(ctx, "asking the founder which release it admits", http.MethodPost, "/v1/join/registrations", req, nil, 15*time.Second)
	e, ok := apierr.As(err)
	if ok && e.Code == apierr.JoinTokenInvalid {
		return err // the token is the first thing to fix
	}
	example := ""
	if ok && e.Code == apierr.ReleaseMismatch {
		example, _ = e.Details["clusterRelease"].(string)
	}
	return releaseUnknown(j.cfg.StateDir, j.cfg.Root, example)
}
