// Package stratumtest is the one harness of the tests that drive the real
// stratum binary (end-to-end, reliability, benchmarks), shaped like
// headscale's servertest: the binary is built once per test process, a
// founder runs as a child with options and is waited for by its banner,
// a typed client logs in and answers *apierr.Error, and release trees are
// built and signed in a few lines.
//
//	func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }
//
//	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true})
//	admin := f.Admin(t)
//	var out struct{ Releases []any }
//	admin.Must(t, "GET", "/v1/admin/releases", nil, 200, &out)
package stratumtest
