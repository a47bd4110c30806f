# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
WORKDIR ?= ./microstock-data
COUNT  ?= 12
# one generated clip too (offline: a 6 s 1080p pan; it goes to Adobe and Vecteezy, the others hold it back)
CLIPS  ?= 1
CLUSTER_HOME ?= .cluster

export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: demo test bench clean postgres readers redis cluster cluster-down test-cluster

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# The cluster extra (psycopg) too: the dead-letter contract tests also run on PostgreSQL; the redis extra
# (prefect-redis): the Redis publisher's test needs it, and without it that test skipped even on CI; and the heif
# extra (pillow-heif, GPL-2 wheels: optional for a contributor, docs/AGENCIES.md): the HEIC tests skip without it.
$(VENV)/.installed-test: pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,cluster,redis,heif]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/microstock run --count $(COUNT) --clips $(CLIPS) --workdir $(WORKDIR)

# Three pytest-xdist workers on the two cores: the tests wait on real servers and a throttled FTP server, and a third
# worker keeps both cores busy meanwhile; a fourth adds ~70 s of CPU (its own Prefect test server, collection) and
# no wall (docs/BENCHMARKS.md, stop 51). Handed out a test or a group at a time (--dist loadgroup): the tests sharing
# a module's server or other module-scoped fixture stay on one worker (work stealing started such a server again on
# each worker that took one of its tests, ~35 s each), and the tests that start real servers or mostly wait go
# first (tests/worker_groups.py), so the tail is short ones. ruff first: a finding fails `make test`.
test: $(VENV)/.installed-test readers
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup -m "not cluster"

# Debian's packages the tests read the delivered files back with, installed (as root, as on CI) in one
# `apt-get update` for all that are missing (three targets each ran their own update before):
# - exiftool (libimage-exiftool-perl): the independent reader of the upload-ready JPEGs' metadata;
# - exiv2: the second reader of the photo corpus (tests/images/test_corpus.py);
# - icc-profiles-free: an Adobe RGB-compatible ICC profile; photos a camera shot in Adobe RGB carry no profile,
#   and are read with this one (tasks/images/camera_colour.py).
readers:
	@missing=""; \
	command -v exiftool >/dev/null 2>&1 || missing="$$missing libimage-exiftool-perl"; \
	command -v exiv2 >/dev/null 2>&1 || missing="$$missing exiv2"; \
	[ -f /usr/share/color/icc/compatibleWithAdobeRGB1998.icc ] || missing="$$missing icc-profiles-free"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	else \
		echo "missing Debian packages the tests need: sudo apt-get install$$missing" >&2; exit 1; \
	fi

# PostgreSQL's server programs (Debian's package): the tests and `make cluster` run initdb/pg_ctl
# themselves, as the postgres user when root. As root (CI) this installs the package if missing.
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "PostgreSQL found: $$(ls -d /usr/lib/postgresql/*/bin | tail -1)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	else \
		echo "PostgreSQL's server is not installed: sudo apt-get install postgresql" >&2; exit 1; \
	fi

# Debian's redis-server for `microstock cluster up --redis` (the server's messaging; pip extra `redis`).
# As root (CI) this installs the package if missing, as `postgres` does.
redis:
	@if command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; then \
		echo "redis-server found"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server; \
	else \
		echo "redis-server is not installed: sudo apt-get install redis-server" >&2; exit 1; \
	fi

# PostgreSQL, a Prefect server on it (loopback, auth required), two workers, two demo accounts.
cluster: $(VENV)/.installed-test postgres
	$(BIN)/microstock cluster up --home $(CLUSTER_HOME)

cluster-down: $(VENV)/.installed-test
	$(BIN)/microstock cluster down --home $(CLUSTER_HOME)

# The cluster's end-to-end tests (a few minutes): they start and stop their own cluster.
test-cluster: $(VENV)/.installed-test postgres
	MICROSTOCK_REQUIRE_POSTGRES=1 $(BIN)/python -m pytest -q -m cluster

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(WORKDIR) .pytest_cache
