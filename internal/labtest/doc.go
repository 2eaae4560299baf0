// Package labtest is a rack in a box: real hosts in network namespaces
// on one Linux bridge, each with its own address in 198.18.0.0/15 (the
// benchmarking range; one /24 per lab, so labs of two test processes do
// not collide), its own software TPM with an EK certificate, a real
// `stratum join` and, once joined, a real `stratum agent`; the founder in
// a namespace of its own. Links can be cut and slowed. It is the one
// harness of the lab's end-to-end tests (e2e/lab) and benchmarks
// (bench/rack_test.go), built on internal/stratumtest.
//
//	lab := labtest.New(t, labtest.Options{Hosts: 4})
//	f := lab.StartFounder(t, stratumtest.FounderOptions{Dev: true})
//	rack := lab.Rack(t, labtest.RackOptions{})
//	rack.WaitJoined(t, time.Minute)
//	lab.WaitRecorded(t, lab.Hosts, 30*time.Second)
//
// It needs root and iproute2 (`ip`, `tc`) and skips the test, saying so,
// without them; swtpm and swtpm-tools for the TPMs. Everything it makes
// (namespaces, links, the bridge, processes, files) is removed when the
// test ends, and New first sweeps what a crashed earlier run left: names
// carry the prefix "stl" and a lab id, and /run/stratum-lab/ID names the
// process that owns lab ID.
//
// The founder approves the rack by itself: Rack applies the inventory of
// the hosts (Enroll, in enroll.go: each matched by its EK certificate's
// hash, the founder trusting the lab's TPM manufacturer), each joiner
// proves its TPM, and no person, harness included, approves anything.
package labtest
