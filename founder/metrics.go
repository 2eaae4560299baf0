package founder

import (
	"stratum/wire"

	"github.com/prometheus/client_golang/prometheus"
)

// registerDomainMetrics exposes the mirror's and the hub's counters.
func (f *Founder) registerDomainMetrics(reg *prometheus.Registry) {
	counter := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	gauge := func(name, help string, v func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	reg.MustRegister(
		counter("stratum_release_busy_total", "Release reads refused with RELEASE_BUSY.", f.repo.BusyCount),
		counter("stratum_release_reads_cut_total", "Release reads cut for being too slow or too long.", f.repo.CutCount),
		counter("stratum_release_corrupt_total", "Release chunks that failed verification while serving.", f.repo.CorruptCount),
		counter("stratum_release_responses_total", "Release file reads started (a slot taken).", f.repo.Reads),
		counter("stratum_release_bytes_sent_total", "Verified release bytes sent.", f.repo.BytesSent),
		gauge("stratum_release_reads_in_flight", "Release reads holding a slot.", f.repo.InFlight),
		counter("stratum_release_cache_hits_total", "Verified release units (16 KiB) sent from the cache of verified chunks.", f.repo.CacheHits),
		counter("stratum_release_cache_misses_total", "Release units read from disk and hashed (16 KiB; 1 MiB for a file without a sub-chunk index).", f.repo.CacheMisses),
		gauge("stratum_release_cache_bytes", "Bytes held by the cache of verified release chunks.", f.repo.CacheBytes),
		gauge("stratum_join_waiters", "Long-polls waiting on a registration.", f.joins.Hub().Waiters),
		gauge("stratum_store_foreign_lock_holders", "Database sessions that are not founders holding the cluster's writer lock or lease (SPEC 16.7).",
			func() int { return len(f.db.ForeignHolders()) }),
		gauge("stratum_founder_isolated", "1 while this founder, restored from a backup, is isolated until stratum takeover (docs/restore-drill.md); else 0.",
			func() int {
				if f.isolated() {
					return 1
				}
				return 0
			}),
		counter("stratum_store_records_rejected_total", "Stored records whose MAC fails (SPEC 16.2: written without the data key), each distinct one counted once per process; each is treated as absent.", f.db.RejectedRecords),
	)
	for _, status := range []string{wire.ReleaseVerified, wire.ReleaseChecking, wire.ReleaseMissing, wire.ReleaseCorrupt} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "stratum_releases", Help: "Imported releases by status (verified, checking, missing, corrupt).", ConstLabels: prometheus.Labels{"status": status},
		}, func() float64 { return float64(f.releasesWithStatus(status)) }))
	}
}

// releasesWithStatus counts the imported releases in one status.
func (f *Founder) releasesWithStatus(status string) int {
	list, err := f.repo.List()
	if err != nil {
		return 0
	}
	n := 0
	for _, r := range list {
		if r.Status == status {
			n++
		}
	}
	return n
}
