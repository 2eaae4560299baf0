package httpapi

import (
	"strings"

	"stratum/apierr"
	"stratum/wire"
)

// isolationRetry is the Retry-After of a refusal while isolated: the
// caller's next try goes to its next founder, and comes back here later.
const isolationRetry = 5

// isolation is the founder's isolation, nil when it serves the cluster.
func (a *API) isolation() *wire.Isolation {
	if a.Isolation == nil {
		return nil
	}
	return a.Isolation()
}

// refuseWhileIsolated answers 503 to every request of the join listener
// and to every node presenting its leaf on the admin listener while the
// founder is isolated: a restored copy must not hand a stale member list,
// a leaf or a delivery to the live cluster's nodes. Operators (bearer
// callers) are answered, so the copy can be inspected.
func (a *API) refuseWhileIsolated(rt Route, c *call) error {
	iso := a.isolation()
	if iso == nil {
		return nil
	}
	if rt.Listener != "join" && c.node == "" && !strings.HasPrefix(c.actor, "node:") {
		return nil
	}
	e := apierr.New(apierr.Unavailable, "this founder was restored from a backup and is isolated: it answers no node or joiner until an operator runs `stratum takeover` on it; try another founder")
	e.RetryAfter = isolationRetry
	return e
}
