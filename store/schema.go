package store

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"
)

// The schema registry, modelled on etcd's server/storage/schema: each
// domain declares the buckets it owns in its own schema.go (typed, so a
// reader sees what a bucket holds), and any domain may add a migration.
// Opening a store runs the pending migrations in version order, each in
// one transaction; the first ones (below) create the store's own buckets
// and then every declared bucket.

// Keyspace is a declared bucket, whatever its value type. The Tx methods
// take one, so a bucket name is written once: in the schema file that
// declares it.
type Keyspace interface {
	Name() string
	keyspace()
}

// Bucket is a declared bucket whose values are JSON-encoded T.
type Bucket[T any] struct{ name string }

// Name is the bucket's stored name.
func (b Bucket[T]) Name() string { return b.name }

func (Bucket[T]) keyspace() {}

// Get decodes the value at key; found is false when absent.
func (b Bucket[T]) Get(tx *Tx, key string) (v T, found bool, err error) {
	found, err = tx.GetJSON(b, key, &v)
	return v, found, err
}

// Put stores v at key.
func (b Bucket[T]) Put(tx *Tx, key string, v T) error { return tx.PutJSON(b, key, v) }

// ForEach decodes each value in key order.
func (b Bucket[T]) ForEach(tx *Tx, fn func(key string, v T) error) error {
	return tx.ForEach(b, func(key string, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("store: decode %s/%s: %w", b.name, key, err)
		}
		return fn(key, v)
	})
}

// Migration brings a store from Version-1 to Version in one transaction.
type Migration struct {
	Version int
	Name    string
	Apply   func(tx *Tx) error
}

var registry = struct {
	sync.Mutex
	buckets    map[string]bool
	migrations []Migration
}{buckets: map[string]bool{}}

var bucketName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// NewBucket declares a bucket. Call it from a package-level var in a
// schema.go; a name declared twice is a programming error and panics at
// start, before any store is opened.
func NewBucket[T any](name string) Bucket[T] {
	registry.Lock()
	defer registry.Unlock()
	if !bucketName.MatchString(name) {
		panic(fmt.Sprintf("store: bucket name %q is not lower-case letters, digits and dashes", name))
	}
	if registry.buckets[name] {
		panic(fmt.Sprintf("store: bucket %q declared twice", name))
	}
	registry.buckets[name] = true
	return Bucket[T]{name: name}
}

// AddMigration registers a migration; versions must be unique. Domains
// call it from an init in their schema.go.
func AddMigration(m Migration) {
	registry.Lock()
	defer registry.Unlock()
	if m.Version <= 0 || m.Name == "" || m.Apply == nil {
		panic(fmt.Sprintf("store: migration %d %q is incomplete", m.Version, m.Name))
	}
	for _, have := range registry.migrations {
		if have.Version == m.Version {
			panic(fmt.Sprintf("store: migrations %q and %q both claim version %d", have.Name, m.Name, m.Version))
		}
	}
	registry.migrations = append(registry.migrations, m)
	sort.Slice(registry.migrations, func(i, j int) bool { return registry.migrations[i].Version < registry.migrations[j].Version })
}

// Migrations returns the registered migrations in version order.
func Migrations() []Migration {
	registry.Lock()
	defer registry.Unlock()
	return slices.Clone(registry.migrations)
}

// DeclaredBuckets returns every declared bucket name, sorted.
func DeclaredBuckets() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.buckets))
	for n := range registry.buckets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SchemaVersion is the newest schema this binary writes: the highest
// registered migration.
func SchemaVersion() int {
	ms := Migrations()
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// The store's own buckets.
var (
	metaBucket = NewBucket[json.RawMessage]("meta")
	// AuditBucket holds the append-only audit chain, keyed by sequence.
	AuditBucket = NewBucket[AuditEvent]("audit")
)

func init() {
	AddMigration(Migration{Version: 1, Name: "meta and audit buckets", Apply: func(tx *Tx) error {
		return tx.createBuckets(metaBucket.Name(), AuditBucket.Name())
	}})
	AddMigration(Migration{Version: 2, Name: "every declared bucket", Apply: func(tx *Tx) error {
		return tx.createBuckets(DeclaredBuckets()...)
	}})
}

// Named is the bucket stored under name, declared or not: for the tools
// that copy or inspect a store whole (migrate, forensic tests). Domain
// code uses the buckets its schema.go declares.
func Named(name string) Keyspace { return Bucket[json.RawMessage]{name: name} }
