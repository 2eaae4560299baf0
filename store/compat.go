package store

// CompatSchemaVersion is the oldest schema level whose binary still runs
// against this binary's schema (the release set's compatSchemaLevel).
// Every binary refuses a store newer than its own, so no older level
// does: it is this binary's level until a migration is declared backward
// compatible.
func CompatSchemaVersion() int { return SchemaVersion() }
