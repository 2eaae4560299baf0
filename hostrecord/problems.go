package hostrecord

import (
	"log/slog"
	"sort"
)

// ProblemLog logs each field's problem once per change: a tool that stays
// broken is said once, not at every record, and its recovery is said too.
type ProblemLog struct {
	last map[string]string
}

// Report logs what changed since the last call.
func (l *ProblemLog) Report(log *slog.Logger, problems []Problem) {
	now := make(map[string]string, len(problems))
	for _, p := range problems {
		now[p.Field] = p.Err
		if l.last[p.Field] != p.Err {
			log.Warn("a release record field is not read", "field", p.Field, "reason", p.Err)
		}
	}
	gone := make([]string, 0)
	for f := range l.last {
		if _, ok := now[f]; !ok {
			gone = append(gone, f)
		}
	}
	sort.Strings(gone)
	for _, f := range gone {
		log.Info("a release record field is read again", "field", f)
	}
	l.last = now
}
