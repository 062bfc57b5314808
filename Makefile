# klab: evaluate Linux kernel patches in QEMU guests.
#
#   make run    install what is missing, fetch debian:7.3, boot it and run a smoke check
#   make test   the test suite (unit and end-to-end under QEMU); .ci/run calls it
#   make bench  end-to-end figures: boot-to-agent time against bare QEMU, initramfs build times, RSS

GO       ?= go
KERNEL   ?= debian:7.3
BIN      := bin/klab
# Debian/Ubuntu packages klab and its tests need on the host.
APT_PKGS := qemu-system-x86 dpkg apt ca-certificates xz-utils
# Commands that prove each package is there.
NEED_CMDS := qemu-system-x86_64 dpkg-deb apt-get

.PHONY: all deps build run test test-unit test-e2e bench fmt vet clean

all: build

# deps installs missing host packages with apt-get when root; otherwise it
# says what to install.
deps:
	@missing=""; \
	for c in $(NEED_CMDS); do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "klab: installing $(APT_PKGS) (missing:$$missing)"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PKGS) >/dev/null || exit 1; \
		else \
			echo "klab: missing:$$missing"; \
			echo "klab: install them with: sudo apt-get install -y $(APT_PKGS)"; \
			exit 1; \
		fi; \
	fi
	@command -v $(GO) >/dev/null 2>&1 || { echo "klab: Go 1.26 or newer is needed (https://go.dev/doc/install); it builds klab and the guest agent"; exit 1; }

build:
	$(GO) build -o $(BIN) ./cmd/klab

run: deps build
	./$(BIN) kernels fetch $(KERNEL)
	./$(BIN) boot --kernel $(KERNEL) -- sh -c 'cat /proc/version; ls -l /dev/fuse; echo tainted: $$(cat /proc/sys/kernel/tainted)'

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...

test-unit:
	$(GO) test -count=1 -short ./...

bench: deps build
	$(GO) run ./cmd/klab-bench -klab $(BIN)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
