package releaseset

// SeedRecordBody lends the external tests (package releaseset_test, which
// may import releasesettest) the seed example's record request.
var SeedRecordBody = seedRecordBody
