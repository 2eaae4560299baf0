package founder

import (
	"fmt"

	"stratum/store"
)

// MigrateResult is what `stratum migrate` checked.
type MigrateResult struct {
	Target      string
	Counts      store.Counts
	AuditEvents int
}

// Migrate copies the directory's bbolt store into the empty PostgreSQL
// database dsn (SPEC section 13), then checks that every bucket holds as
// many keys there as in the file and that the audit chain verifies on
// both sides with the same length. The founder must be stopped: opening
// the file takes its lock.
func Migrate(d DataDir, ks KeySource, dsn string) (MigrateResult, error) {
	var res MigrateResult
	if err := store.NeedDatabase(dsn); err != nil {
		return res, fmt.Errorf("--to: %w", err)
	}
	if !d.Initialized() {
		return res, fmt.Errorf("%s holds no store (%s is missing)", d, d.DB())
	}
	key, err := d.LoadDataKey(ks)
	if err != nil {
		return res, err
	}
	src, err := store.Open(d.DB(), key, d.schemaFloor(key, false)...)
	if err != nil {
		return res, err
	}
	defer src.Close()
	dst, err := store.Open(dsn, key)
	if err != nil {
		return res, err
	}
	defer dst.Close()
	res.Target = dst.Where()
	if res.Counts, err = store.Copy(src, dst); err != nil {
		return res, err
	}
	names, err := src.Buckets()
	if err != nil {
		return res, err
	}
	want, err := src.CountKeys(names)
	if err != nil {
		return res, err
	}
	got, err := dst.CountKeys(names)
	if err != nil {
		return res, err
	}
	for _, b := range names {
		if want[b] != got[b] {
			return res, fmt.Errorf("after the copy bucket %s holds %d keys in the database, %d in the file", b, got[b], want[b])
		}
	}
	fileEvents, err := src.VerifyAudit()
	if err != nil {
		return res, fmt.Errorf("the file's audit chain does not verify: %w", err)
	}
	if res.AuditEvents, err = dst.VerifyAudit(); err != nil {
		return res, fmt.Errorf("the copied audit chain does not verify: %w", err)
	}
	if res.AuditEvents != fileEvents {
		return res, fmt.Errorf("the database holds %d audit events, the file %d", res.AuditEvents, fileEvents)
	}
	return res, nil
}
