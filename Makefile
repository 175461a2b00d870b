# dgramio — make test is the one test command (CI runs it through .ci/run).
#
#   make tools   the command-line tools into bin/: dgramio-echo,
#                dgramio-loadgen, netbench, httpxdp, ... (docs/tools.md)
#   make deps    Go modules; DPDK 22.11 from apt when pkg-config cannot find it
#   make test    vet, every test (privileged ones need root), the debug-build
#                tests, a brief run of every fuzz target, then the DPDK
#                packages again with -tags dpdk
#   make bench   the default netbench run: every kind, DPDK's too when libdpdk
#                is installed (BENCHFLAGS adds netbench flags)
#   make fuzz    every fuzz target for FUZZTIME each (default 1m)
#   make soak    256 MiB through each stream kind over the lossy wire, and an
#                io.Copy echo of 256 MiB on kernel tcp and tcp-xdp, three
#                seeds (SOAK_SEEDS) each; 100,000 misbehaving clients against
#                the native engine; net.Conn's io.Copy echo through the lossy
#                wire; dgramio-bulk's loss matrix (0.1%, 1%, 3% at 0.2 ms and
#                10 ms), byte-exact, on every stream kind (not in CI)
#
# With CI=true a skipped test fails the run (see internal/tools/testgate).

GO        ?= go
FUZZTIME  ?= 1m
BRIEFFUZZ ?= 5s
TESTFLAGS ?=
BENCHFLAGS ?=
DPDK_PKGS ?= dpdk-dev libdpdk-dev pkg-config
SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c

TESTGATE := $(GO) run ./internal/tools/testgate

.PHONY: all build tools deps deps-go deps-dpdk vet test test-go test-debug test-dpdk fuzz-brief fuzz bench soak clean

all: build

build:
	$(GO) build ./...

tools:
	$(GO) build -o bin/ ./cmd/...

deps: deps-go deps-dpdk

deps-go:
	$(GO) mod download

# DPDK comes from Debian's packages; install them only when missing.
deps-dpdk:
	@if pkg-config --exists libdpdk 2>/dev/null; then \
		echo "deps: libdpdk $$(pkg-config --modversion libdpdk) found"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "deps: installing $(DPDK_PKGS) from apt"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DPDK_PKGS); \
	else \
		echo "deps: libdpdk not found and cannot install it (need root and apt): the dpdk kinds will be skipped"; \
	fi

vet:
	$(GO) vet ./...
	@# The root package and the FrameIO packages build on other systems
	@# too (an editor or a cross build of a program that imports them).
	GOOS=darwin $(GO) build . ./frameio/...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

test: deps vet test-go test-debug fuzz-brief test-dpdk

# -p 1: privileged tests make network namespaces and busy-poll; on a small
# machine two such packages at once starve each other.
test-go:
	$(GO) test -p 1 -count=1 -json -timeout 30m $(TESTFLAGS) ./... | $(TESTGATE) -quiet

# Tests that need the debug build (Rx data poisoned at the next Rx) live in
# files tagged dgramio_debug: run their packages with the tag.
test-debug:
	@pkgs=$$(git ls-files '*_test.go' | xargs grep -l '^//go:build.*\bdgramio_debug\b' | xargs -r -n1 dirname | sort -u | sed 's|^|./|'); \
	if [ -n "$$pkgs" ]; then \
		echo "test-debug: $$pkgs"; \
		$(GO) test -tags dgramio_debug -p 1 -count=1 -json -timeout 20m $(TESTFLAGS) $$pkgs | $(TESTGATE) -quiet; \
	fi

# The DPDK code builds only with the dpdk tag: run those packages again with
# it, so that nothing in CI is skipped for want of the tag.
test-dpdk:
	@if pkg-config --exists libdpdk 2>/dev/null; then \
		pkgs=$$(git ls-files '*.go' | xargs grep -l '^//go:build.*\bdpdk\b' | xargs -r -n1 dirname | sort -u | sed 's|^|./|'); \
		echo "test-dpdk: $$pkgs"; \
		$(GO) test -tags dpdk -p 1 -count=1 -json -timeout 20m $(TESTFLAGS) $$pkgs | $(TESTGATE) -quiet; \
	elif [ "$$CI" = true ]; then \
		echo "test-dpdk: libdpdk missing in CI"; exit 1; \
	else \
		echo "test-dpdk: libdpdk missing, skipped (run make deps as root)"; \
	fi

# Every fuzz target, briefly (CI), or for FUZZTIME each (make fuzz).
fuzz-brief:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(BRIEFFUZZ)

fuzz:
	@set -e; log=$$(mktemp -t dgramio-fuzz.XXXXXX); trap 'rm -f "$$log"' EXIT; \
	for file in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz'); do \
		grep -q '^//go:build.*dpdk' $$file && continue; \
		pkg=./$$(dirname $$file); \
		for f in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$file | cut -d' ' -f2); do \
			echo "fuzz: $$pkg $$f for $(FUZZTIME)"; \
			if ! $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg > "$$log" 2>&1; then \
				cat "$$log"; \
				if grep -q 'context deadline exceeded' "$$log" && \
				   ! grep -qE 'Failing input written|panic:|_test.go:[0-9]+:' "$$log" && \
				   $(GO) test -count=1 -run "^$$f\$$" $$pkg; then \
					echo "fuzz: $$f: a bare 'context deadline exceeded' at the end of -fuzztime, no failing input, and the corpus replays clean: Go's fuzzing coordinator race (go.dev/issue/75804, fixed in Go 1.27), not a finding"; \
				else exit 1; fi; \
			fi; \
			grep -E '^fuzz: elapsed' "$$log" | tail -n 1 || true; \
		done; \
	done

bench:
	@tags=; if pkg-config --exists libdpdk 2>/dev/null; then tags="-tags dpdk"; \
	else echo "bench: libdpdk missing (make deps installs it): dpdk and tcp-dpdk not measured"; fi; \
	echo "$(GO) run $$tags ./cmd/netbench $(BENCHFLAGS)"; \
	$(GO) run $$tags ./cmd/netbench $(BENCHFLAGS)

SOAK_SEEDS ?= 3

# Each run of TestFaultCopyWire draws a fresh wire seed (logged: replay
# with WIRE_SEED=<seed>), so -count is the number of seeds.
soak:
	SOAK=1 $(GO) test -count=1 -run '^TestFaultLossyWire' -v -timeout 60m ./internal/faulttest/
	SOAK=1 $(GO) test -count=$(SOAK_SEEDS) -run '^TestFaultCopyWire' -v -timeout 60m ./internal/faulttest/
	@if pkg-config --exists libdpdk 2>/dev/null; then \
		SOAK=1 $(GO) test -tags dpdk -count=1 -run '^TestFaultLossyWire' -v -timeout 60m ./internal/faulttest/ && \
		SOAK=1 $(GO) test -tags dpdk -count=$(SOAK_SEEDS) -run '^TestFaultCopyWire/tcp-dpdk' -v -timeout 60m ./internal/faulttest/; \
	else echo "soak: libdpdk missing, tcp-dpdk not soaked"; fi
	SOAK=1 $(GO) test -count=1 -run '^TestSoakMisbehavingClients$$' -v -timeout 30m ./stack/native/
	SOAK=1 $(GO) test -count=1 -run '^TestCopyLossyWire' -v -timeout 30m ./tcp/netconn/
	$(GO) run ./cmd/dgramio-bulk --kinds tcp,tcp-xdp,tcp-xdp+netstack --conns 1,16 --dir both \
		--loss 0.1%,1%,3% --delay 0.2ms,10ms --duration 5s --out $${TMPDIR:-/tmp}/dgramio-soak-bulk

clean:
	rm -rf bench/results bin
