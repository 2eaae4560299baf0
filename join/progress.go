package join

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/strictjson"
	"stratum/wire"
)

var phases = []string{wire.PhaseInstalling, wire.PhaseDone, wire.PhaseFailed}

// DecodeProgress decodes strictly and validates.
func DecodeProgress(body []byte) (wire.ProgressRequest, error) {
	var req wire.ProgressRequest
	if err := strictjson.DecodeChecked(body, &req, "the progress report has problems", func() apierr.Fields { return progressProblems(req) }); err != nil {
		return wire.ProgressRequest{}, err
	}
	return req, nil
}

func progressProblems(r wire.ProgressRequest) apierr.Fields {
	var f apierr.Fields
	if !contains(phases, r.Phase) {
		f.Add("phase", "must be one of %s", strings.Join(phases, ", "))
	}
	if len(r.Message) > maxReasonSize || !utf8.ValidString(r.Message) {
		f.Add("message", "at most %d bytes of UTF-8", maxReasonSize)
	}
	return f
}

// Progress records what the joiner reports in its turn. Reports repeated
// after a lost answer (installing twice, done after joined, failed after
// failed) answer the current view, so a retrying joiner is not refused.
func (s *Service) Progress(keyPin, joinID string, req wire.ProgressRequest) (wire.JoinerView, error) {
	if err := progressProblems(req).Err("the progress report has problems"); err != nil {
		return wire.JoinerView{}, err
	}
	actor := keyActor(keyPin)
	var out wire.JoinerView
	err := s.update(func(t *txn) error {
		r, err := t.joinerRecord(keyPin, joinID)
		if err != nil {
			return err
		}
		if err := s.progress(t, &r, req, actor); err != nil {
			return err
		}
		if r, err = t.mustRecord(joinID); err != nil {
			return err
		}
		out, err = s.joinerView(t.Tx, r)
		return err
	})
	return out, err
}

func (s *Service) progress(t *txn, r *record, req wire.ProgressRequest, actor string) error {
	repeat := (req.Phase == wire.PhaseInstalling && r.State == wire.StateInstalling) ||
		(req.Phase == wire.PhaseDone && (r.State == wire.StateJoined || (r.State == wire.StateInstalling && !r.DoneAt.IsZero()))) ||
		(req.Phase == wire.PhaseFailed && r.State == wire.StateFailed)
	if repeat {
		return nil
	}
	if !inTurn(r.State) {
		return apierr.New(apierr.Conflict, "join %s is %s: progress is reported only in its turn (delivering or installing)", r.JoinID, r.State)
	}
	switch req.Phase {
	case wire.PhaseFailed:
		reason := req.Message
		if reason == "" {
			reason = "the joiner reported a failure"
		}
		return t.fail(r, actor, "join.failed", reason)
	case wire.PhaseInstalling:
		r.State = wire.StateInstalling
		if err := t.putRecord(r); err != nil {
			return err
		}
		if err := t.vouchMember(r); err != nil {
			return err
		}
		return t.Audit("join.installing", actor, r.JoinID, map[string]string{"message": req.Message})
	}
	// done: the joiner applied the generation it was admitted at. A done
	// without installing first implies it.
	r.State, r.DoneAt = wire.StateInstalling, t.now
	if err := t.putRecord(r); err != nil {
		return err
	}
	if err := t.vouchMember(r); err != nil {
		return err
	}
	if err := t.Audit("join.done", actor, r.JoinID, map[string]string{"message": req.Message, "generation": strconv.FormatUint(r.Generation, 10)}); err != nil {
		return err
	}
	if err := t.recordApplied(r.Assignment.NodeID, r.Generation, actor); err != nil {
		return err
	}
	return t.settle()
}

// recordApplied raises a member's applied generation; it never lowers it.
func (t *txn) recordApplied(nodeID string, g uint64, actor string) error {
	// What m points to is shared with other readers: only a field of m
	// itself changes below.
	m, found, err := t.s.decoded.Member(t.Tx, nodeID)
	if err != nil {
		return err
	}
	if !found {
		return apierr.New(apierr.NotFound, "no member %s", nodeID)
	}
	if g <= m.AppliedGeneration {
		return nil
	}
	m.AppliedGeneration = g
	if err := cluster.PutMember(t.Tx, m); err != nil {
		return err
	}
	return t.Audit("cluster.member.applied", actor, nodeID, map[string]string{"generation": strconv.FormatUint(g, 10)})
}

// vouchMember marks r's member as installed: from now on its transport
// leaf and its release records count (SPEC 10.2, 10.3).
func (t *txn) vouchMember(r *record) error {
	m, found, err := cluster.GetMember(t.Tx, r.Assignment.NodeID)
	if err != nil || !found || m.Installed {
		return err
	}
	m.Installed = true
	return cluster.PutMember(t.Tx, m)
}
