# The two promises of the README: `make demo` and `make test` work on a fresh Debian machine.
# Every target installs what it needs: system packages through apt (when root), Python packages
# pinned by constraints.txt into .venv.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every program a test starts is listed in tests/support/commands.py; its package is here
# (tests/test_system_packages.py checks both, on the machine it runs on).
SYSTEM_PACKAGES := xfsprogs attr acl e2fsprogs util-linux fuse3 libfuse3-3 libfuse3-dev pkg-config \
  openssh-server openssh-client iproute2 mount rsync time git make procps file fontconfig \
  nodejs redis-server redis-tools chromium chromium-driver zsh groff-base prometheus systemd
DEMO_DIR ?= /tmp/rcp-demo
LATENCYFS := benchmarks/latencyfs/latencyfs

.PHONY: demo test check pytest format system system-packages clean latencyfs emulators bench bench-system bench-rcp bench-base bench-compare bench-compare-system bench-stores bytecode stress

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench,airflow]'
	$(MAKE) --no-print-directory bytecode
	touch $@

# An editable install leaves our modules uncompiled, and where PYTHONDONTWRITEBYTECODE is
# set every command would compile them again (~30 ms of each rcp start-up); a wheel
# install compiles them once, like this.
bytecode:
	$(BIN)/python -m compileall -q core operators rcp_provider benchmarks >/dev/null

# apt only where we are root on Debian; elsewhere the tests that need these tools skip with a reason.
system:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; for p in $(SYSTEM_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q ' installed$$' || missing="$$missing $$p"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	fi

# What `make system` installs for `make test`, one name a line (read by the tests).
system-packages:
	@printf '%s\n' $(SYSTEM_PACKAGES)

check: $(VENV)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

pytest: system $(VENV)/.installed latencyfs emulators
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: pytest check

# The reliability suite at full scale (issue 8): every category of tests/reliability,
# its figures rendered to benchmarks/results/reliability.md. `make test` runs it small.
STRESS_FIGURES := benchmarks/results/reliability.json
stress: system $(VENV)/.installed latencyfs emulators
	$(BIN)/python -m pytest --stress --reliability-out $(STRESS_FIGURES) tests/reliability $(PYTEST_ARGS); \
	  status=$$?; \
	  $(BIN)/python -m benchmarks.reliability $(STRESS_FIGURES) --out benchmarks/results/reliability.md; \
	  exit $$status

demo: system $(VENV)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" DEMO_DIR="$(DEMO_DIR)" bash scripts/demo.sh

# azurite, the Azure Blob emulator of the object-store tests and benchmarks
# (benchmarks/objectstores.py starts it), pinned by its package-lock.json. Node comes
# from SYSTEM_PACKAGES; Debian's nodejs leaves npm to a package of its own.
EMULATORS := benchmarks/emulators
emulators: system $(EMULATORS)/node_modules/.installed

$(EMULATORS)/node_modules/.installed: $(EMULATORS)/package.json $(EMULATORS)/package-lock.json
	@command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }
	npm ci --prefix $(EMULATORS) --no-audit --no-fund --loglevel=error
	touch $@

# The emulated NFS of the benchmarks and their tests (benchmarks/latencyfs.py starts it).
# Without libfuse3-dev (not root, so no apt) it is not built and its root-only tests skip.
latencyfs: system
	@if pkg-config --exists fuse3 2>/dev/null; then \
	  $(MAKE) --no-print-directory $(LATENCYFS); \
	else \
	  echo "latencyfs: libfuse3-dev missing, not built (its tests need root and skip)"; \
	fi

LATENCYFS_SOURCES := benchmarks/latencyfs/latencyfs.c benchmarks/latencyfs/faults.c
$(LATENCYFS): $(LATENCYFS_SOURCES) benchmarks/latencyfs/faults.h
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror $$(pkg-config --cflags fuse3) \
	  -o $@ $(LATENCYFS_SOURCES) $$(pkg-config --libs fuse3) -lm

# The benchmark of issue 3 (benchmarks/README.md): peers and the Linux source from apt,
# then `python -m benchmarks.harness`; the report and plots go to benchmarks/results.
# `make bench BENCH_ARGS=--quick` for the ~10 minute version.
BENCH_PACKAGES := rclone linux-source b3sum
BENCH_ARGS ?= --full

bench-system:
	@$(MAKE) --no-print-directory system SYSTEM_PACKAGES="$(SYSTEM_PACKAGES) $(BENCH_PACKAGES)"

bench: bench-system $(VENV)/.installed latencyfs bench-rcp
	$(BIN)/python -m benchmarks.harness --rcp $(BENCH_VENV)/bin/rcp $(BENCH_ARGS)

# Issue 26's object-store benchmark (benchmarks/README.md): rcp beside s3fs, rclone and
# Airflow's ObjectStoragePath on the emulators behind the counting proxy; the report
# goes to benchmarks/results/stores.md. `STORES_ARGS=--quick` for the ~20 minute one.
STORES_ARGS ?=
bench-stores: bench-system $(VENV)/.installed emulators bench-rcp
	$(BIN)/python -m benchmarks.stores --python $(BENCH_VENV)/bin/python \
	  --out benchmarks/results/stores.md $(STORES_ARGS)

# rcp as users install it (a wheel: compiled bytecode, no editable-install import hook,
# which costs every start-up ~20 ms, with its store clients), rebuilt from the working
# tree on every bench run.
BENCH_VENV := .venv-bench-rcp
bench-rcp: $(VENV)/.installed
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -c constraints.txt ".[s3,gcs,azure]"
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall .

# Issue 24's speed check (benchmarks/README.md): the wheel of BASE (a git rev) in a venv
# of its own beside the working tree's (bench-rcp), both measured in one harness run
# on the committed cells (`--compare`), interleaved run by run; the report goes to
# COMPARE_OUT, not over the full one. `make bench-compare BASE=main`.
BASE_VENV := .venv-bench-base
COMPARE_OUT ?= benchmarks/results/compare
COMPARE_ARGS ?=
ifneq ($(filter bench-compare bench-base,$(MAKECMDGOALS)),)
ifeq ($(strip $(BASE)),)
$(error give the build to compare against: make $(MAKECMDGOALS) BASE=<git rev>)
endif
endif

bench-compare: bench-compare-system $(VENV)/.installed latencyfs bench-rcp bench-base
	$(BIN)/python -m benchmarks.harness --compare --rcp $(BENCH_VENV)/bin/rcp \
	  --baseline-rcp $(BASE_VENV)/bin/rcp \
	  --baseline-name "$(BASE): git $$(git rev-parse --short '$(BASE)^{commit}')" \
	  --out $(COMPARE_OUT) $(COMPARE_ARGS)

# Only rcp runs in those cells: of the bench peers just the Linux source is needed.
bench-compare-system:
	@$(MAKE) --no-print-directory system SYSTEM_PACKAGES="$(SYSTEM_PACKAGES) linux-source"

# The wheel of BASE, built from `git archive` of that commit in a temporary directory
# (the working tree is not touched), installed like bench-rcp's (pinned by this tree's
# constraints.txt, so both builds run on the same dependencies).
bench-base: $(VENV)/.installed
	@git rev-parse --verify --quiet '$(BASE)^{commit}' >/dev/null || { echo "BASE=$(BASE) is not a commit" >&2; exit 2; }
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  git archive "$$(git rev-parse '$(BASE)^{commit}')" | tar -x -C "$$tmp"; \
	  test -x $(BASE_VENV)/bin/python || $(PYTHON) -m venv $(BASE_VENV); \
	  $(BASE_VENV)/bin/python -m pip install --quiet --upgrade pip; \
	  $(BASE_VENV)/bin/python -m pip install --quiet -c constraints.txt "$$tmp"; \
	  $(BASE_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall "$$tmp"

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(BASE_VENV) .mypy_cache .ruff_cache .pytest_cache $(LATENCYFS) \
	  $(EMULATORS)/node_modules
