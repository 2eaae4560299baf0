package releaseset

// SeedRecordBody lends the external tests (package releaseset_test, which
// may import releasesettest) the seed example's record request.
var SeedRecordBody = seedRecordBody

// SetFragmentBudget lets a test make every set "large" (streamed).
func SetFragmentBudget(n int) (restore func()) {
	old := fragmentBudget
	fragmentBudget = n
	return func() { fragmentBudget = old }
}

// SetBackgroundBuildMembers lets a test make a small set "large" (built in
// the background).
func SetBackgroundBuildMembers(n int) (restore func()) {
	old := backgroundBuildMembers
	backgroundBuildMembers = n
	return func() { backgroundBuildMembers = old }
}

// SetMemberRead runs fn between a record's read of its member and the
// shared commit that stores the record.
func SetMemberRead(fn func(nodeID string)) (restore func()) {
	old := memberRead
	memberRead = fn
	return func() { memberRead = old }
}
