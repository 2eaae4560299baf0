package joiner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"stratum/wire"

	"stratum/apierr"
)

// install handles delivering and installing (SPEC 7 step 5): persist the
// delivery, report installing, report done. Persisting is idempotent (every
// file is rewritten atomically from the delivery, which the founder keeps
// until the join ends), so a joiner that stopped anywhere in here simply
// does it again. It returns the view to continue from: the one it was
// given, or a final one the founder moved to meanwhile.
func (j *joiner) install(ctx context.Context, v *view) (*view, error) {
	if v.Delivery == nil {
		return nil, j.fail(ctx, v, fmt.Errorf("the founder reported %s without the delivery", v.State))
	}
	res, err := j.persist(v.Delivery.NodeYAML, v.bundle)
	if err != nil {
		return nil, j.fail(ctx, v, err)
	}
	j.log.printf("delivery persisted under %s: node %s of cluster %s (role %s), admitted at generation %d", j.cfg.Root, res.nodeID, res.clusterID, res.role, res.generation)
	if j.cfg.InstallAgent {
		if err := j.installAgent(ctx); err != nil {
			return nil, j.fail(ctx, v, err)
		}
	}
	if v.State == wire.StateDelivering {
		if cur, err := j.report(ctx, v, wire.PhaseInstalling); err != nil || cur != nil {
			return cur, err
		}
		j.log.printf("reported installing")
	}
	// Applying is what the node's own services do from these files at
	// their next start (firstboot renders keepalived, the control plane
	// reads controlplane.env): nothing is left for the joiner to run.
	if cur, err := j.report(ctx, v, wire.PhaseDone); err != nil || cur != nil {
		return cur, err
	}
	j.st.DoneReported = true
	if err := j.st.save(j.cfg.StateDir); err != nil {
		return nil, err
	}
	j.log.printf("reported done; waiting until every member has applied generation %d", res.generation)
	return v, nil
}

// report posts a progress phase. A 409 means the founder is already past
// it (a restart after the report went through) or the join ended
// meanwhile (an operator cancelled it): the current view decides, and a
// final one is returned for the main loop to act on.
func (j *joiner) report(ctx context.Context, v *view, phase string) (*view, error) {
	_, err := j.call(ctx, "reporting "+phase, http.MethodPost, registrationPath(v.JoinID)+"/progress", wire.ProgressRequest{Phase: phase}, nil, time.Minute)
	if err == nil {
		return nil, nil
	}
	if e, ok := apierr.As(err); ok && e.Code == apierr.Conflict {
		cur, gerr := j.get(ctx, v.JoinID, "", 0)
		if gerr != nil {
			return nil, err
		}
		switch {
		case wire.IsFinal(cur.State):
			return cur, nil
		case phase == wire.PhaseInstalling && cur.State == wire.StateInstalling:
			return nil, nil
		}
	}
	return nil, fmt.Errorf("report %s: %w", phase, err)
}

// fail reports a local failure after delivery to the founder (which fails
// the join and frees the queue) and returns the ErrFailed outcome. A run
// that was merely interrupted reports nothing: the rerun picks up.
func (j *joiner) fail(ctx context.Context, v *view, local error) error {
	if errors.Is(local, context.Canceled) || ctx.Err() != nil {
		return local
	}
	msg := local.Error()
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	j.log.printf("the join failed on this machine: %v", local)
	j.log.printf("reporting the failure to the founder")
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := j.call(rctx, "reporting failed", http.MethodPost, registrationPath(v.JoinID)+"/progress", wire.ProgressRequest{Phase: wire.PhaseFailed, Message: msg}, nil, time.Minute)
	if err != nil {
		j.log.printf("could not report the failure to the founder: %v (its delivery timeout will fail the join)", err)
		// The founder may have ended the join already (a 409): then
		// its delivery goes now, not at the next run.
		if cur, gerr := j.get(rctx, v.JoinID, "", 0); gerr == nil && wire.IsFinal(cur.State) {
			j.discardDelivery(cur.JoinID, cur.State)
		}
	} else {
		j.st.State = wire.StateFailed
		_ = j.st.save(j.cfg.StateDir)
		// The founder failed the join on this word: its delivery goes.
		j.discardDelivery(v.JoinID, wire.StateFailed)
	}
	return &outcome{sentinel: ErrFailed, joinID: v.JoinID, local: local}
}
