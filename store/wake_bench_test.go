package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"stratum/internal/pgtest"
)

// BenchmarkWakeAcrossReplicas measures SPEC section 13's wake: from the
// return of a committing Update on one replica to the note reaching a
// subscriber on another (target p99 <= 20 ms).
//
//	go test -run '^$' -bench WakeAcrossReplicas -benchtime 500x ./store/
func BenchmarkWakeAcrossReplicas(b *testing.B) {
	dsn := pgtest.DSN(b)
	open := func() *DB {
		db, err := Open(dsn, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	writer, waiter := open(), open()
	heard := make(chan time.Time, 1)
	waiter.Subscribe("bench", func(string) { heard <- time.Now() })
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var committed time.Time
		err := writer.Update(func(tx *Tx) error {
			tx.Notify("bench", fmt.Sprint(i))
			return cBucket.Put(tx, "k", []byte{byte(i)})
		})
		committed = time.Now()
		if err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-heard:
			lat = append(lat, max(at.Sub(committed), 0))
		case <-time.After(5 * time.Second):
			b.Fatal("the note did not reach the other replica")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*q))] }
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
