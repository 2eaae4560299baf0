package join

import (
	"stratum/store"
	"stratum/wire"
)

// OfferedRelease names the release the founder serves to this
// registration (GET .../{joinId}/release/{path}): only to its key, only
// while it is needs-upgrade and no mirror is the source. Anything else is
// 404, like an unknown id.
func (s *Service) OfferedRelease(keyPin, joinID string) (string, error) {
	var rel string
	err := s.view(func(tx *store.Tx) error {
		r, found, err := getRecord(tx, joinID)
		if err != nil {
			return err
		}
		if !found || keyPin == "" || r.KeyPin != keyPin || r.State != wire.StateNeedsUpgrade || r.Upgrade == nil || r.Upgrade.Source != "" {
			return notFound(joinID)
		}
		rel = r.Upgrade.To
		return nil
	})
	return rel, err
}
