package join

import (
	"fmt"
	"slices"
	"strings"

	"stratum/apierr"
	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

// Reasons a RELEASE_MISMATCH carries in details.reason.
const (
	ReasonNewer          = "newer"
	ReasonNoSelfUpgrade  = "self-upgrade not requested"
	ReasonNoPayload      = "no payload to offer"
	ReasonNotComparable  = "not comparable"
	ReasonNoUpgradePath  = "not an upgrade from the joiner's release"
	releaseMismatchIntro = "the joiner's release does not match the cluster's"
)

// releaseRule decides the state a registration on release joiner starts
// in (SPEC 4.2): pending, needs-upgrade with its upgrade, or a refusal.
func (s *Service) releaseRule(tx *store.Tx, joiner string, selfUpgrade bool) (string, *wire.Upgrade, error) {
	cr, err := s.clusterRelease(tx)
	if err != nil {
		return "", nil, err
	}
	if semver.Valid(joiner) != nil || semver.Valid(cr) != nil {
		return "", nil, mismatch(joiner, cr, ReasonNotComparable, "the cluster release %q is not a semantic version", cr)
	}
	switch c := semver.Compare(joiner, cr); {
	case c == 0:
		return wire.StatePending, nil, nil
	case c > 0:
		return "", nil, mismatch(joiner, cr, ReasonNewer, "the joiner runs %s, newer than the cluster's %s: install it with the cluster's release", joiner, cr)
	case !selfUpgrade:
		return "", nil, mismatch(joiner, cr, ReasonNoSelfUpgrade, "the joiner runs %s and the cluster %s: run stratum join with --self-upgrade, or install the cluster's release", joiner, cr)
	}
	source, ok := s.payloadSource(cr)
	if !ok {
		return "", nil, mismatch(joiner, cr, ReasonNoPayload, "the joiner runs %s and the cluster %s, and the founder has no payload of %s to offer: import it (stratum release import) or configure --release-source", joiner, cr, cr)
	}
	// SPEC 16.8: offer only a release whose signed manifest upgrades from
	// the joiner's (the joiner refuses any other, and runs no hook).
	if s.cfg.MirrorURL == "" && s.cfg.Payloads != nil {
		if from := s.cfg.Payloads.UpgradesFrom(cr); len(from) > 0 && !slices.Contains(from, joiner) {
			return "", nil, mismatch(joiner, cr, ReasonNoUpgradePath, "the joiner runs %s and the cluster's %s upgrades only from %s: install %s on the joiner", joiner, cr, strings.Join(from, ", "), cr)
		}
	}
	return wire.StateNeedsUpgrade, &wire.Upgrade{From: joiner, To: cr, Source: source}, nil
}

// payloadSource says where a joiner fetches release: the mirror when one
// is configured (the founder then serves nothing), else the founder itself
// ("") when it has the release imported.
func (s *Service) payloadSource(release string) (string, bool) {
	if s.cfg.MirrorURL != "" {
		return strings.TrimRight(s.cfg.MirrorURL, "/") + "/" + release, true
	}
	if s.cfg.Payloads != nil && s.cfg.Payloads.Offered(release) {
		return "", true
	}
	return "", false
}

func mismatch(joiner, clusterRel, reason, format string, args ...any) error {
	e := apierr.New(apierr.ReleaseMismatch, "%s: %s", releaseMismatchIntro, fmt.Sprintf(format, args...))
	e.Details = map[string]any{"joinerRelease": joiner, "clusterRelease": clusterRel, "reason": reason}
	return e
}
