package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"stratum/wire"

	"stratum/crypto"
)

// membersWait is the hold asked of the founder (its cap).
const membersWait = 60 * time.Second

// membersLoop long-polls the membership; each new generation is written
// to members.json (atomically) and then reported applied.
func (a *Agent) membersLoop(ctx context.Context) {
	var (
		applied uint64 // 0: nothing applied by this run yet
		bo      = newBackoff(a.cfg.Interval)
		lastErr string
	)
	for ctx.Err() == nil {
		start := time.Now()
		g, err := a.applyOnce(ctx, applied)
		if err == nil {
			changed := g != applied
			if changed {
				a.log.Info("membership applied", "generation", g)
			}
			applied = g
			bo.succeeded()
			lastErr = ""
			a.ready.applied()
			// A founder that answers an unchanged generation without holding
			// (an older one, a proxy cutting the hold) is not asked in a
			// tight loop.
			if !changed && time.Since(start) < time.Second && !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := bo.failed()
		if msg := err.Error(); msg != lastErr {
			a.log.Warn("following the membership failed; retrying with backoff", "err", err, "trust", isTrustError(err), "retryIn", wait)
			lastErr = msg
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// applyOnce waits for a generation other than applied, writes it and
// reports it; it returns the generation now applied.
func (a *Agent) applyOnce(ctx context.Context, applied uint64) (uint64, error) {
	path := fmt.Sprintf("/v1/cluster/members?wait=%d&generation=%d", int(membersWait/time.Second), applied)
	var raw json.RawMessage
	if err := a.call(ctx, http.MethodGet, path, nil, &raw, membersWait*21/20+30*time.Second); err != nil {
		return applied, err
	}
	var view wire.MembersView
	if err := json.Unmarshal(raw, &view); err != nil || view.Generation == 0 || view.Members == nil {
		return applied, errors.New("the founder's members list is not one")
	}
	if view.Generation == applied {
		return applied, nil // the hold ended without a change
	}
	if err := crypto.WriteFileAtomic(filepath.Join(a.cfg.Root, membersPath), append(raw, '\n'), 0o644); err != nil {
		return applied, fmt.Errorf("write members.json: %w", err)
	}
	body := wire.AppliedRequest{Generation: view.Generation}
	if err := a.call(ctx, http.MethodPut, "/v1/cluster/members/"+url.PathEscape(a.id.nodeID)+"/applied", body, nil, 30*time.Second); err != nil {
		return applied, fmt.Errorf("report generation %d applied: %w", view.Generation, err)
	}
	return view.Generation, nil
}
