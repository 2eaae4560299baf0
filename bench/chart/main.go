// Command chart draws the performance charts of docs/PERFORMANCE.md from
// `make bench` outputs (bin/bench.out), one file a run:
//
//	go run ./bench/chart -out docs/performance RUN.out [RUN.out...]
//
// It writes targets.svg (every SPEC section 21 target as the share of its
// limit it leaves, per run), mirror.svg (the mirror's throughput over
// nginx's per case, beside each target), releaseset.svg (the release set's
// p99 latencies beside their limits) and, when the runs carry the
// register floor, register.svg (the founder's CPU a registration beside
// the bare TLS server's and the target), and when they carry the mirror's
// `mirror cpu` lines, mirror-cpu.svg (nginx's CPU a GiB over the
// founder's, per case).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	out := flag.String("out", "docs/performance", "directory the SVG charts are written to")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: chart [-out DIR] BENCH_OUTPUT...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var runs []run
	for _, file := range flag.Args() {
		f, err := os.Open(file)
		if err != nil {
			fail(err)
		}
		r, err := parse(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), f)
		f.Close()
		if err != nil {
			fail(err)
		}
		if len(r.Targets) == 0 {
			fail(fmt.Errorf("%s: no target lines (a make bench output has them at its end)", file))
		}
		runs = append(runs, r)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	written, err := drawAll(runs, *out)
	if err != nil {
		fail(err)
	}
	for _, f := range written {
		fmt.Println("wrote", f)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chart:", err)
	os.Exit(1)
}
