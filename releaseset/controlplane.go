package releaseset

// ControlPlane is a control plane's build and schema levels: the founder's
// own in a Set, each node's in its Record.
type ControlPlane struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// SchemaLevel is the newest database migration this build carries.
	// Absent when not known.
	SchemaLevel *int `json:"schemaLevel,omitempty"`
	// CompatSchemaLevel is the oldest schema level whose control plane
	// still runs against this build's schema.
	CompatSchemaLevel *int `json:"compatSchemaLevel,omitempty"`
	// DatabaseSchemaLevel is the database's schema level, above SchemaLevel
	// when this build runs against a newer one.
	DatabaseSchemaLevel *int `json:"databaseSchemaLevel,omitempty"`
}
