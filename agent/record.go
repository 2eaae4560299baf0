package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"stratum/hostrecord"
	"stratum/semver"
	"stratum/wire"
)

// collectEvery is how often the host is read to notice a change; the
// record is sent on a change, or when the interval is due.
func collectEvery(interval time.Duration) time.Duration {
	return min(max(interval/4, time.Second), 15*time.Second)
}

// jitter spreads an interval by +-10 %, so a fleet started together
// does not record together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// recordLoop records the node's release at start, when it changes, and
// every interval; failures back off and are retried.
func (a *Agent) recordLoop(ctx context.Context) {
	var (
		lastSent []byte
		nextDue  time.Time
		bo       = newBackoff(a.cfg.Interval)
		problems hostrecord.ProblemLog
		lastErr  string
	)
	for ctx.Err() == nil {
		rec, ps := hostrecord.Collect(ctx, a.host)
		problems.Report(a.log, ps)
		req := wire.RecordRequest{RunningRelease: a.runningRelease(), Release: rec}
		key := recordKey(req)
		wait := collectEvery(a.cfg.Interval)
		if a.cfg.checkEvery > 0 {
			wait = a.cfg.checkEvery
		}
		if lastSent == nil || !bytes.Equal(key, lastSent) || !time.Now().Before(nextDue) {
			err := a.call(ctx, http.MethodPut, "/v1/cluster/nodes/"+url.PathEscape(a.id.nodeID)+"/release", req, nil, 30*time.Second)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				wait = bo.failed()
				if msg := err.Error(); msg != lastErr {
					a.log.Warn("recording the release failed; retrying with backoff", "err", err, "trust", isTrustError(err), "retryIn", wait)
					lastErr = msg
				}
			} else {
				if lastSent == nil || lastErr != "" {
					a.log.Info("release recorded", "node", a.id.nodeID, "runningRelease", req.RunningRelease)
				}
				lastSent, lastErr, nextDue = key, "", time.Now().Add(jitter(a.cfg.Interval))
				bo.succeeded()
				a.ready.recorded()
			}
		}
		if lastErr == "" {
			wait = min(wait, max(time.Until(nextDue), 0))
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// recordKey is the record without its collection time: what "changed"
// compares.
func recordKey(req wire.RecordRequest) []byte {
	req.Release.HostReportedAt = nil
	b, _ := json.Marshal(req)
	return b
}

// runningRelease is the release the joiner wrote, when it is one.
func (a *Agent) runningRelease() string {
	b, err := os.ReadFile(filepath.Join(a.cfg.Root, releasePath))
	if err != nil {
		return ""
	}
	rel := strings.TrimSpace(string(b))
	if semver.Valid(rel) != nil {
		a.badRelease.Do(func() {
			a.log.Warn("etc/stratum/release does not hold a release; recording none", "content", firstLine(rel))
		})
		return ""
	}
	return rel
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
