# klab: evaluate Linux kernel patches in QEMU guests.
#
#   make run    install what is missing, fetch debian:7.3, boot it, and run an A/B experiment on it
#   make test   the test suite (unit and end-to-end under QEMU); .ci/run calls it
#   make test-times  the same, then the time each test and package took
#   make bench  end-to-end figures: boot-to-agent time against bare QEMU, initramfs build times, RSS
#   make bench-build  kernel builds from source: cold build against bare make, rebuild, cache hit, boot
#   make bench-fidelity  klab's Go workload engine against fio, job by job, in one debian:7.3 guest
#   make bench-fuse  FUSE over /dev/fuse against io_uring (the seed's tables), in a debian:7.3 guest and on the host
#   make bench-fstests  klab fstests against a bare QEMU running ./check, --jobs 2 against 1, the userspace's boot cost

GO       ?= go
KERNEL   ?= debian:7.3
BIN      := bin/klab
# Debian/Ubuntu packages klab and its tests need on the host.
# What `klab kernels build` needs to build kernels from source.
BUILD_APT_PKGS := build-essential flex bison bc libelf-dev libssl-dev cpio kmod git patch
APT_PKGS := qemu-system-x86 dpkg apt ca-certificates xz-utils libfuse3-dev gcc pkg-config fio e2fsprogs $(BUILD_APT_PKGS)
# What make bench-fuse needs to build libfuse 3.18's passthrough_hp with
# io_uring for the side-by-side comparison (in a guest and on the host).
BENCH_APT_PKGS := meson ninja-build g++ pkg-config liburing-dev libnuma-dev
# What building fstests from source needs (klab fstests build): its
# libraries' headers, the autotools, and xfsprogs, whose libhandle.so.1
# xfslibs-dev's libhandle.so links to.
FSTESTS_APT_PKGS := xfslibs-dev libacl1-dev libaio-dev liburing-dev libgdbm-dev libgdbm-compat-dev libcap-dev uuid-dev autoconf automake libtool xfsprogs make gcc
# What only the tests need: headless Chromium renders the HTML report;
# ccache lets the e2e kernel builds of one source in several work trees
# (a tarball's, a git tree's) share their compilations; npm installs
# gitlab-ci-local, which runs the emitted GitLab pipeline (rsync copies
# the project for each of its jobs).
TEST_APT_PKGS := chromium ccache npm rsync
# gitlab-ci-local, pinned: the newest release that runs on Node.js 20
# (Debian trixie's, and this project's CI hosts'); 4.74 and later need
# Node.js 22. It goes where npm puts global commands (npm install -g, as
# root), in PATH as the apt packages are, so the tests find it the same
# way and no cache clean-up (klab cache gc) can remove it.
GITLAB_CI_LOCAL := 4.73.0
# Commands that prove each package is there.
BUILD_NEED_CMDS := make flex bison bc git patch cpio depmod
NEED_CMDS := qemu-system-x86_64 dpkg-deb apt-get gcc pkg-config fio mke2fs perf $(BUILD_NEED_CMDS)
# perf, for experiments with profile: perf: Debian's linux-perf, or
# Ubuntu's linux-tools for the running kernel.
PERF_PKG = $$(apt-cache show linux-perf >/dev/null 2>&1 && echo linux-perf || echo linux-tools-generic)

.PHONY: all deps test-deps fstests-deps build install uninstall run test test-times test-unit test-e2e soak soak-matrix bench bench-build bench-fidelity bench-fuse bench-fstests bench-deps fmt vet clean

all: build

# deps installs missing host packages with apt-get when root; otherwise it
# says what to install.
deps:
	@missing=""; \
	for c in $(NEED_CMDS); do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	[ -f /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c ] || missing="$$missing libfuse3-dev"; \
	[ -f /usr/include/libelf.h ] || missing="$$missing libelf-dev"; \
	[ -f /usr/include/openssl/ssl.h ] || missing="$$missing libssl-dev"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "klab: installing $(APT_PKGS) perf (missing:$$missing)"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PKGS) $(PERF_PKG) >/dev/null || exit 1; \
		else \
			echo "klab: missing:$$missing"; \
			echo "klab: install them with: sudo apt-get install -y $(APT_PKGS) linux-perf (Ubuntu: linux-tools-generic)"; \
			exit 1; \
		fi; \
	fi
	@command -v $(GO) >/dev/null 2>&1 || { echo "klab: Go 1.26 or newer is needed (https://go.dev/doc/install); it builds klab and the guest agent"; exit 1; }

# test-deps installs what only the tests need (when root).
test-deps:
	@missing=""; \
	for c in chromium ccache npm rsync; do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "klab: installing $(TEST_APT_PKGS) (missing:$$missing; for the HTML report test, shared kernel compilations and the GitLab pipeline test)"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEST_APT_PKGS) >/dev/null || exit 1; \
		else \
			echo "klab: missing:$$missing; without chromium the HTML report test is skipped, without ccache kernel builds take longer, without npm and rsync the GitLab pipeline test is skipped (sudo apt-get install -y $(TEST_APT_PKGS))"; \
		fi; \
	fi
	@if [ "$$(gitlab-ci-local --version 2>/dev/null)" != "$(GITLAB_CI_LOCAL)" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v npm >/dev/null 2>&1; then \
			echo "klab: installing gitlab-ci-local $(GITLAB_CI_LOCAL) with npm (for the GitLab pipeline test)"; \
			npm install -g --no-fund --no-audit --loglevel=error gitlab-ci-local@$(GITLAB_CI_LOCAL) >/dev/null || exit 1; \
		else \
			echo "klab: gitlab-ci-local $(GITLAB_CI_LOCAL) is missing; without it the GitLab pipeline test is skipped (sudo npm install -g gitlab-ci-local@$(GITLAB_CI_LOCAL))"; \
		fi; \
	fi

# fstests-deps installs what building fstests from source needs (when
# root); otherwise it prints the apt-get line and fails.
fstests-deps:
	@missing=""; \
	for c in autoconf automake libtoolize make gcc xfs_io; do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	for h in xfs/xfs.h sys/acl.h libaio.h liburing.h gdbm.h ndbm.h sys/capability.h uuid/uuid.h; do \
		[ -f /usr/include/$$h ] || missing="$$missing $$h"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "klab: installing $(FSTESTS_APT_PKGS) (missing:$$missing)"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(FSTESTS_APT_PKGS) >/dev/null || exit 1; \
		else \
			echo "klab: missing for building fstests:$$missing"; \
			echo "klab: install them with: sudo apt-get install -y $(FSTESTS_APT_PKGS)"; \
			exit 1; \
		fi; \
	fi

# build makes a klab that carries its guest parts (the static agent and the
# u-root base initramfs, see images/embedded): installed anywhere, it needs
# neither this source tree nor Go. A first klab without them builds the
# parts (cached under ~/.cache/klab), then the real one embeds them.
EMBED_DIR := images/embedded
build:
	$(GO) build -o $(BIN).stage ./cmd/klab
	./$(BIN).stage initramfs parts --out $(EMBED_DIR)
	$(GO) build -tags klab_embed -ldflags "-X main.buildCommit=$$(git describe --always --dirty 2>/dev/null || echo unknown)" -o $(BIN) ./cmd/klab
	@rm -f $(BIN).stage

# install puts klab in $(PREFIX)/bin (default /usr/local), with its shell
# completions and the experiments' patches in $(PREFIX)/share/klab.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/klab
	install -d $(DESTDIR)$(PREFIX)/share/klab/patches
	install -m 0644 experiments/patches/*.patch $(DESTDIR)$(PREFIX)/share/klab/patches/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	./$(BIN) completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/klab
	@echo "klab: installed $(DESTDIR)$(PREFIX)/bin/klab"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/klab $(DESTDIR)$(PREFIX)/share/bash-completion/completions/klab
	rm -rf $(DESTDIR)$(PREFIX)/share/klab

# make run ends with klab's main job in miniature: an A/B experiment on
# $(KERNEL), FUSE over /dev/fuse against FUSE-over-io_uring (creates and
# 4 KiB O_DIRECT random reads, 5 rounds), printing the text report and the
# path of the HTML one. A few minutes under TCG on 2 cores. RUN_FLAGS
# passes klab run's options (--rounds 2, --format md).
DEMO ?= fuse-transport
RUN_FLAGS ?=
run: deps build
	./$(BIN) kernels fetch $(KERNEL)
	./$(BIN) boot --kernel $(KERNEL) -- sh -c 'cat /proc/version; ls -l /dev/fuse; echo tainted: $$(cat /proc/sys/kernel/tainted)'
	./$(BIN) run $(DEMO) --kernel $(KERNEL) $(RUN_FLAGS)

# One package at a time (-p 1): the end-to-end tests compare timings under
# TCG, and the host FUSE stress run would otherwise load the same CPUs.
# Inside e2e, the timing tests run alone first; then the others boot two
# guests at a time (KLAB_E2E_GUESTS) beside the kernel builds. The e2e
# package takes about 25 minutes cold on 2 cores (14 with warm caches); 50
# leaves room for a loaded machine within CI's 90.
# The unit tests' packages run two at a time (most of their time is
# waiting: FUSE timeouts, real mounts), before the end-to-end tests, which
# run alone: their guests and kernel builds share the cores by their own
# rules (guest slots, builds at the lowest priority).
TEST_FLAGS := -p 1 -count=1 -timeout 50m
UNIT_FLAGS := -p 2 -count=1 -timeout 20m
UNIT_PKGS = $$($(GO) list ./... | grep -v '^klab/e2e$$')
test: deps test-deps bench-deps
	@$(MAKE) --no-print-directory fstests-deps || echo "klab: the fstests build test will be skipped (it fails in CI)"
	$(GO) vet ./...
	$(GO) test $(UNIT_FLAGS) $(UNIT_PKGS)
	$(GO) test $(TEST_FLAGS) ./e2e/

# test-times runs the tests as make test does, recording go test -json in
# TEST_JSON, then prints where the time went: each package's 20 longest
# tests and every package's time (go run ./e2e/testtimes -h for more).
TEST_JSON ?= bin/test.json
test-times: deps test-deps bench-deps
	@$(MAKE) --no-print-directory fstests-deps || echo "klab: the fstests build test will be skipped (it fails in CI)"
	@mkdir -p $(dir $(TEST_JSON))
	$(GO) vet ./...
	$(GO) test $(UNIT_FLAGS) -json $(UNIT_PKGS) > $(TEST_JSON); rc=$$?; \
	$(GO) test $(TEST_FLAGS) -json ./e2e/ >> $(TEST_JSON) || rc=$$?; \
	$(GO) run ./e2e/testtimes -top 20 $(TEST_JSON); exit $$rc

test-unit:
	$(GO) test -count=1 -short ./...

# 100 boots through the klab binary, then 30 in one process: every boot
# works, nothing is left behind (QEMU, temporary files, sockets), klab's
# memory, descriptors and goroutines do not grow; prints the boot-time
# distribution. About 20 minutes under TCG. SOAK_FLAGS passes -n,
# -in-process and -kernel (`go run ./cmd/klab-soak -h`).
SOAK_FLAGS ?=
soak: deps build
	$(GO) run ./cmd/klab-soak -klab $(BIN) $(SOAK_FLAGS)

# A matrix of 40 one-guest cells on debian:6.12 and debian:7.3 through
# klab matrix run --jobs 2 (about 3 minutes under TCG), with the same
# checks: every cell complete, no QEMU or temporary file left, klab's
# descriptors and memory at the end as at the start.
soak-matrix: deps build
	$(GO) run ./cmd/klab-soak -klab $(BIN) -n 0 -in-process 0 -matrix 40 $(SOAK_FLAGS)

bench: deps build
	$(GO) run ./cmd/klab-bench -klab $(BIN)
	$(MAKE) --no-print-directory bench-fuse

# Two cold kernel builds (klab's and a bare make's): about 15 minutes on 2 cores.
bench-build: deps build
	$(GO) run ./cmd/klab-bench-build -klab $(BIN)

# One guest, four jobs, each run by both engines in alternation: the
# experiment experiments/fidelity.yaml, a few minutes under TCG.
# FIDELITY_FLAGS passes klab run's options (--rounds, --set, --format).
FIDELITY_FLAGS ?=
bench-fidelity: deps build
	./$(BIN) run fidelity --kernel $(KERNEL) $(FIDELITY_FLAGS)

# klab's passthrough server over /dev/fuse against FUSE-over-io_uring, in
# the shape of the seed's tables: in a guest, the experiment
# experiments/fuse-uring.yaml (about 6 minutes under TCG; BENCH_FUSE_RUN
# passes klab run's options), then on the host (as root, no VM) next to
# libfuse's passthrough_hp, the experiment experiments/fuse-bench-host.yaml
# run with --kernel host (about 12 minutes; BENCH_FUSE_HOST passes klab
# run's options, e.g. --set jobs=2 --rounds 3 or --compare transport).
# A host run changes no module parameter: the io_uring cells need fuse's
# enable_uring, which this target turns on, and says so.
BENCH_FUSE_RUN ?=
BENCH_FUSE_HOST ?=
ENABLE_URING := /sys/module/fuse/parameters/enable_uring
bench-fuse: deps bench-deps build
	./$(BIN) run fuse-uring --kernel $(KERNEL) $(BENCH_FUSE_RUN)
	@if [ "$$(id -u)" != 0 ]; then echo "klab: the host part of bench-fuse needs root (it mounts FUSE); skipped"; exit 0; fi; \
	if [ -e $(ENABLE_URING) ] && [ "$$(cat $(ENABLE_URING))" != Y ]; then \
		echo "klab: turning on fuse's enable_uring on this host for the io_uring cells (echo Y > $(ENABLE_URING))"; \
		echo Y > $(ENABLE_URING) || exit 1; \
	fi; \
	./$(BIN) run fuse-bench-host --kernel host $(BENCH_FUSE_HOST)

# klab fstests against the same tests run by ./check in a bare QEMU guest
# with a static init (harness overhead, per test and per run), --jobs 2
# against --jobs 1, and boot-to-agent with and without the userspace:
# about 30 minutes under TCG. It needs an fstests source
# ($$KLAB_FSTESTS_SRC, or -fstests-src in BENCH_FSTESTS, which passes
# klab-bench-fstests' flags, e.g. -pairs 3 -shard-pairs 2 or -sections boot).
BENCH_FSTESTS ?=
bench-fstests: deps build
	$(GO) run ./cmd/klab-bench-fstests -klab $(BIN) $(BENCH_FSTESTS)

# bench-deps installs what building libfuse's passthrough_hp needs (when
# root); without them the host part of bench-fuse stops and names them,
# and the e2e test of fstests on passthrough_hp skips (fails in CI).
bench-deps:
	@missing=""; \
	for c in meson ninja g++ pkg-config; do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	[ -f /usr/include/liburing.h ] || missing="$$missing liburing-dev"; \
	[ -f /usr/include/numa.h ] || missing="$$missing libnuma-dev"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "klab: installing $(BENCH_APT_PKGS) (missing:$$missing)"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BENCH_APT_PKGS) >/dev/null || exit 1; \
		else \
			echo "klab: missing for the libfuse comparison:$$missing (sudo apt-get install -y $(BENCH_APT_PKGS))"; \
		fi; \
	fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
	rm -f $(EMBED_DIR)/klab-agent $(EMBED_DIR)/base.cpio $(EMBED_DIR)/parts.json
