# stratum: the founder appliance and its joiner, one static binary.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X stratum/buildinfo.version=$(VERSION) -X stratum/buildinfo.commit=$(COMMIT)
DATA      ?= ./data
FUZZTIME  ?= 10s
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build run test bench fuzz fuzz-ci crash abuse soak failover lab lint clean

## build: the static release binary (CGO_ENABLED=0) at bin/stratum
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/stratum .

## run: a dev founder on an embedded bbolt file in ./data
run: build
	./bin/stratum serve --dev --data $(DATA)

## test: the whole suite (unit, end-to-end, fuzz corpora replay)
test:
	$(GO) test -count=1 -timeout 8m ./...

## bench: the benchmarks in bench/ (each prints its figures), then one
## line per SPEC section 21 target: `target NAME: VALUE (want OP LIMIT) pass|MISS`
bench: build
	@{ $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./bench/... 2>&1; echo $$? > bin/bench.rc; } | tee bin/bench.out
	@echo; echo "SPEC section 21 targets (CPU: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $$(cut -d' ' -f1-3 /proc/loadavg)):"
	@grep -E '^target [a-z0-9-]+: ' bin/bench.out || echo "(none printed)"
	@echo "charts of this run: make charts RUNS=bin/bench.out (docs/PERFORMANCE.md)"
	@exit $$(cat bin/bench.rc)

.PHONY: docs charts

## docs: the generated reference in docs/reference (the CLI pages from the
## command tree, the API page from httpapi/openapi.json); a test fails
## when the committed pages are stale
docs:
	$(GO) run ./internal/refdoc/gen

## charts: the charts of docs/PERFORMANCE.md (docs/performance/*.svg) from
## make bench outputs, one file a run: make charts RUNS="bin/bench.out ..."
## (default: the runs recorded in docs/performance/runs)
RUNS ?= $(wildcard docs/performance/runs/*.out)
charts:
	$(GO) run ./bench/chart -out docs/performance $(RUNS)

## fuzz: each fuzz target for FUZZTIME
fuzz:
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for t in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$dir $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$dir || exit 1; \
	  done; \
	done

## fuzz-ci: every fuzz target for a few seconds (CI). A count, not a
## duration: a duration that ends while a worker is mid-input makes go test
## report "context deadline exceeded" as a failure.
fuzz-ci:
	$(MAKE) fuzz FUZZTIME=3000x

## crash: the SIGKILL harness at full length (60 kills) and the disk-full run
crash:
	CRASH_KILLS=60 $(GO) test -count=1 -v -timeout 30m ./reliability/crash/

## abuse: hostile clients against the real binary, full counts
abuse:
	ABUSE_FULL=1 $(GO) test -count=1 -v -timeout 20m ./reliability/abuse/

## soak: 30 minutes of mixed traffic, sampling RSS, goroutines and fds
soak:
	SOAK_DURATION=30m $(GO) test -count=1 -v -timeout 45m ./reliability/soak/

## failover: the Patroni failover test at full length (5 rounds of a
## switchover and a SIGKILL of the primary's postmaster; make test runs 1)
failover:
	STRATUM_FAILOVER_ROUNDS=5 $(GO) test -count=1 -v -run 'TestPatroni' -timeout 30m ./e2e/

## lab: the rack in a box at full size: N hosts (network namespaces, each
## with its own address, software TPM, joiner and agent) join the founder
## at once (make test runs 4). Needs root and iproute2.
N ?= 50
lab:
	LAB_HOSTS=$(N) $(GO) test -count=1 -v -run '^TestRack$$' -timeout 30m ./e2e/lab/

## lint: go.mod tidy, gofmt, go vet, staticcheck
lint:
	$(GO) mod tidy -diff
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin
