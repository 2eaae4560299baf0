package store

import (
	"fmt"
	"regexp"
	"sort"
	"stratum/wire"
	"sync"
)

// The bucket registry: each domain declares the buckets it owns in its
// own schema.go (typed, so a reader sees what a bucket holds, and whether
// its records are authenticated). The migrations are one ordered list in
// migrations.go.

var registry = struct {
	sync.Mutex
	buckets       map[string]bool
	authenticated []string
}{buckets: map[string]bool{}}

var bucketName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// declare records a bucket name. Call NewBucket or NewRawBucket from a
// package-level var in a schema.go; a name declared twice is a
// programming error and panics at start, before any store is opened.
func declare(name string, opts []Option) bucketSpec {
	registry.Lock()
	defer registry.Unlock()
	if !bucketName.MatchString(name) {
		panic(fmt.Sprintf("store: bucket name %q is not lower-case letters, digits and dashes", name))
	}
	if registry.buckets[name] {
		panic(fmt.Sprintf("store: bucket %q declared twice", name))
	}
	spec := bucketSpec{name: name}
	for _, o := range opts {
		o(&spec)
	}
	registry.buckets[name] = true
	if spec.authenticated {
		registry.authenticated = append(registry.authenticated, name)
	}
	return spec
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

// The store's own buckets.
var (
	metaBucket = NewRawBucket("meta")
	// AuditBucket holds the append-only audit chain, keyed by sequence.
	AuditBucket = NewBucket[wire.AuditEvent]("audit", Appended())
)

// Named is the bucket stored under name, declared or not: for the tools
// that copy or inspect a store whole (migrate, forensic tests). Domain
// code uses the buckets its schema.go declares.
func Named(name string) RawBucket { return RawBucket{spec: bucketSpec{name: name}} }
