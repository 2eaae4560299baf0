# stratum: the founder appliance and its joiner, one static binary.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X stratum/cli.version=$(VERSION) -X stratum/cli.commit=$(COMMIT)
DATA      ?= ./data
FUZZTIME  ?= 10s
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build run test bench fuzz lint clean

## build: the static release binary (CGO_ENABLED=0) at bin/stratum
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/stratum .

## run: a dev founder on an embedded bbolt file in ./data
run: build
	./bin/stratum serve --dev --data $(DATA)

## test: the whole suite (unit, end-to-end, fuzz corpora replay)
test:
	$(GO) test -count=1 -timeout 8m ./...

## bench: the benchmarks in bench/ (each prints its figures)
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/...

## fuzz: each fuzz target for FUZZTIME
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## lint: gofmt, go vet, staticcheck
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin
