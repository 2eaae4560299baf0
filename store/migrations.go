package store

import (
	"fmt"
	"sync"
)

// The migrations: one ordered list, in this file (as etcd's
// server/storage/schema keeps its plan in one place). A store at schema N
// has run the first N entries; SchemaVersion is the list's length, the
// same in every binary whatever it links. To add a migration, append one
// entry; never reorder, remove or renumber one (a retired migration stays
// as a no-op so the numbers of old stores keep their meaning).
//
// An entry's work is the store's own (apply) and/or named domain steps
// whose code lives in the domain that owns the data (a Step provided from
// its schema.go): the store knows no domain's rules, and a domain's step
// touches only that domain's buckets.
var migrations = []migration{
	1: {name: "meta and audit buckets", apply: func(tx *Tx) error {
		return tx.createBuckets(metaBucket.Name(), AuditBucket.Name())
	}},
	2: {name: "every declared bucket", apply: func(tx *Tx) error {
		return tx.createBuckets(DeclaredBuckets()...)
	}},
	3:  {name: "retired (an earlier build's number; nothing to do)"},
	4:  {name: "retired (an earlier build's number; nothing to do)"},
	5:  {name: "index of what queued joins claim", steps: []Step{StepJoinClaims}},
	6:  {name: "trust rules: admission release, member leaf serials", steps: []Step{StepClusterAdmissionRelease, StepClusterMemberTrust}},
	7:  {name: "keyed audit chain", apply: keyAuditChain},
	8:  {name: "API tokens record their creator", steps: []Step{StepIAMTokenCreators}},
	9:  {name: "authenticated records (SPEC 16.2)", apply: authenticateRecords},
	10: {name: "appliance admin no longer shares the delivered cluster admin password", steps: []Step{StepFounderApplianceAdmin}},
	// Buckets declared since 2 (the inventory of expected machines):
	// making every declared one is a no-op for those that exist.
	11: {name: "every declared bucket, again", apply: func(tx *Tx) error {
		return tx.createBuckets(DeclaredBuckets()...)
	}},
}

// The schema levels other code names.
const (
	keyedAuditSchema = 7
	recordMACSchema  = 9
)

// A Step is a domain's part of a migration, named here and provided by
// the domain (Provide).
type Step string

// The domain steps of the list above.
const (
	StepJoinClaims              Step = "join: rebuild the index of what queued joins claim"
	StepClusterAdmissionRelease Step = "cluster: seed the admission release from clusterRelease"
	StepClusterMemberTrust      Step = "cluster: members get their audited leaf serial and installed mark"
	StepIAMTokenCreators        Step = "iam: API tokens record their creator"
	StepFounderApplianceAdmin   Step = "founder: the appliance admin whose password is the delivered cluster secret must change it"
)

type migration struct {
	name  string
	apply func(tx *Tx) error
	steps []Step
}

var provided = struct {
	sync.Mutex
	fns map[Step]func(tx *Tx) error
}{fns: map[Step]func(tx *Tx) error{}}

// Provide gives the code of a domain step; call it from a package-level
// var in the domain's schema.go (`var _ = store.Provide(...)`). A step
// not in the list, or provided twice, panics at start.
func Provide(step Step, fn func(tx *Tx) error) struct{} {
	provided.Lock()
	defer provided.Unlock()
	known := false
	for _, m := range migrations {
		for _, s := range m.steps {
			known = known || s == step
		}
	}
	if !known || fn == nil {
		panic(fmt.Sprintf("store: step %q is not in the migrations list", step))
	}
	if provided.fns[step] != nil {
		panic(fmt.Sprintf("store: step %q provided twice", step))
	}
	provided.fns[step] = fn
	return struct{}{}
}

// MissingSteps lists the domain steps this binary does not link. The
// stratum binary links every domain (a test checks it); a package's
// tests link only some, and a step of an unlinked domain has no data of
// its own to migrate there.
func MissingSteps() []Step {
	provided.Lock()
	defer provided.Unlock()
	var out []Step
	for _, m := range migrations {
		for _, s := range m.steps {
			if provided.fns[s] == nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// run applies entry v in tx.
func (m migration) run(tx *Tx) error {
	if m.apply != nil {
		if err := m.apply(tx); err != nil {
			return err
		}
	}
	for _, s := range m.steps {
		provided.Lock()
		fn := provided.fns[s]
		provided.Unlock()
		if fn == nil {
			continue
		}
		if err := fn(tx); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// Migration names one entry of the list.
type Migration struct {
	Version int
	Name    string
}

// Migrations lists the migrations in order.
func Migrations() []Migration {
	out := make([]Migration, 0, len(migrations)-1)
	for v := 1; v < len(migrations); v++ {
		out = append(out, Migration{Version: v, Name: migrations[v].name})
	}
	return out
}

// SchemaVersion is the newest schema this binary writes.
func SchemaVersion() int { return len(migrations) - 1 }

// ApplyMigration runs entry version of the list again inside tx, whatever
// the store's level: for a domain's tests of its migration (a migration
// must be safe to apply twice).
func ApplyMigration(tx *Tx, version int) error {
	if version < 1 || version >= len(migrations) {
		return fmt.Errorf("store: no migration %d", version)
	}
	return migrations[version].run(tx)
}
