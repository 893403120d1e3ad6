# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# The versions the test suite ran with (Airflow's convention: one file per Python version, the project
# itself left out); every install below is pinned by it. `make constraints` writes it from the test venv.
CONSTRAINTS := constraints-3.11.txt
UV_INSTALL = $(UV) pip install --python $(PY) -c $(CONSTRAINTS)
PIP_INSTALL = $(PY) -m pip install -c $(CONSTRAINTS)

.PHONY: demo constraints test test-fast lint typecheck install install-test delta-jars clean ui-bundle cluster cluster-short cluster-jars install-cluster docs dist

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv

# uv resolves and installs in seconds; fall back to pip where uv is unavailable.
$(VENV)/.installed: setup.cfg pyproject.toml $(CONSTRAINTS) | $(PY)
	$(UV_INSTALL) -e . || $(PIP_INSTALL) -e .
	touch $@

# the Spark engine (the `spark` extra), for the Spark demo
$(VENV)/.installed-spark: setup.cfg pyproject.toml $(CONSTRAINTS) | $(PY)
	$(UV_INSTALL) -e ".[spark]" || $(PIP_INSTALL) -e ".[spark]"
	touch $@ $(VENV)/.installed

$(VENV)/.installed-test: setup.cfg pyproject.toml $(CONSTRAINTS) | $(PY)
	$(UV_INSTALL) -e . --group test || $(PIP_INSTALL) -e . --group test
	touch $@ $(VENV)/.installed $(VENV)/.installed-spark

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Delta Lake's Spark jars for the installed pyspark/delta-spark wheels, copied once by Maven into the venv,
# where every Spark session deltaguard creates finds them.
DELTA_JARS := $(VENV)/delta-jars
$(DELTA_JARS)/.fetched: | $(VENV)/.installed-spark
	$(PY) -m deltaguard.engines.spark.jars --dest $(DELTA_JARS)
	touch $@
delta-jars: $(DELTA_JARS)/.fetched

# The Spark pipeline (delta-spark over a local Spark Connect server; needs a JDK 17 and Maven for Delta's
# jars) by default; `make demo ENGINE=delta-rs` runs the delta-rs one, which needs only the package itself:
# no Java, no Maven, no development group.
ENGINE ?= spark
DEMO_NEEDS_spark := $(VENV)/.installed-spark $(DELTA_JARS)/.fetched
DEMO_NEEDS_delta-rs := $(VENV)/.installed
demo: $(DEMO_NEEDS_$(ENGINE))
	$(PY) -m benchmarks.demo --engine $(ENGINE)

# Regenerate the constraints file from the environment `make test` ran in (the project itself, pip and
# setuptools left out), after a dependency change has passed the suite. (Not a prerequisite of the venv:
# the installs are pinned by this file, so regenerating it must not reinstall first.)
constraints: | $(PY)
	{ echo "# The tested environment of airflow-provider-deltaguard on Python 3.11: \`make constraints\`."; \
	  echo "# Install with: pip install -c $(CONSTRAINTS) ."; \
	  $(UV) pip freeze --python $(PY) --exclude-editable --exclude pip --exclude setuptools; } > $(CONSTRAINTS)

# The production-shaped stack (benchmarks/cluster): CeleryExecutor with two workers, Redis, PostgreSQL
# (metadata and lease store), moto's S3 server, a Spark standalone cluster behind Spark Connect. Needs the
# Debian packages redis-server and postgresql (apt-get install -y redis-server postgresql). Its short run
# (one delta-rs pipeline run, the cheap faults; no Spark, no S3 jars) is part of `make test`, which installs
# the cluster extra; the full run is `make cluster` (docs/deployment.md has the figures).
$(VENV)/.installed-cluster: $(VENV)/.installed-test
	$(UV_INSTALL) -e ".[cluster]" --group test || $(PIP_INSTALL) -e ".[cluster]" --group test
	touch $@
install-cluster: $(VENV)/.installed-cluster
S3_JARS := $(VENV)/s3-jars
$(S3_JARS)/.fetched: $(VENV)/.installed-test
	$(PY) -m benchmarks.cluster.jars $(S3_JARS)
	touch $@
cluster-jars: $(S3_JARS)/.fetched
cluster: $(VENV)/.installed-cluster $(DELTA_JARS)/.fetched $(S3_JARS)/.fetched
	$(PY) -m benchmarks.cluster run
cluster-short: $(VENV)/.installed-cluster
	$(PY) -m pytest tests/e2e/test_cluster_short.py -s

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check provider operators sensors dags_examples tests benchmarks lab
	$(VENV)/bin/ruff format --check provider operators sensors dags_examples tests benchmarks lab

# mypy cannot follow setup.cfg's folder mapping, so it checks a hard-linked copy laid out as the
# installed package (operators and sensors inside it); otherwise every deltaguard import would silently
# become Any. One run over the namespace, so types are checked across modules; its incremental cache stays
# in .mypy_cache (the hard links keep the files' times, so unchanged modules are not checked again).
typecheck: $(VENV)/.installed-test
	rm -rf build/typecheck && mkdir -p build/typecheck && cp -al provider build/typecheck/deltaguard
	cp -al operators build/typecheck/deltaguard/operators && cp -al sensors build/typecheck/deltaguard/sensors
	cd build/typecheck && ../../$(VENV)/bin/mypy --config-file ../../pyproject.toml \
		--cache-dir ../../.mypy_cache -p deltaguard

# The whole suite in two pytest processes side by side, one per core: the `slow or spark` tests (real
# schedulers, Airflow stacks, JVMs) one after another in the foreground, as a serial run would; the rest
# (not slow, not spark: no stack, no JVM, each in its own tmp_path) beside them, its report printed after.
# Each has its own temporary root and its own PostgreSQL cluster; make fails if either does.
# (pytest-xdist's `--dist loadgroup` would do this in one process, but with pytest 9 it does not group:
# xdist 3.8 sets `item._nodeid`, which pytest 9's `nodeid` no longer reads.)
# Each process is bounded (TEST_BOUND_S: 75 minutes, inside CI's 90 with the install; about 2.7 times the
# slower process's time on a quiet machine, so a slow machine is not taken for a hang): past it, SIGUSR1 writes every thread's
# stack to build/tests-*-stacks.txt (tests/conftest.py) and the process is killed a minute later, so a hang
# anywhere (a test, a fixture's teardown, the interpreter's exit) fails the run with its stacks printed.
TEST_BOUND_S ?= 4500
BOUNDED = timeout --signal=USR1 --kill-after=60 $(TEST_BOUND_S)
test: $(VENV)/.installed-cluster $(DELTA_JARS)/.fetched lint typecheck
	@mkdir -p build; rm -f build/tests-*-stacks.txt; status=0; \
	DELTAGUARD_TEST_STACKS=$(CURDIR)/build/tests-light-stacks.txt $(BOUNDED) \
		$(VENV)/bin/python -m pytest tests -m "not slow and not spark" -q -p no:cacheprovider --durations=25 \
		--basetemp=/tmp/deltaguard-tests-light >build/tests-light.log 2>&1 & light=$$!; \
	DELTAGUARD_TEST_STACKS=$(CURDIR)/build/tests-heavy-stacks.txt $(BOUNDED) \
		$(VENV)/bin/python -m pytest tests -m "slow or spark" --durations=25 --basetemp=/tmp/deltaguard-tests-heavy || status=$$?; \
	wait $$light || status=$$?; \
	echo "==== tests neither slow nor spark (build/tests-light.log) ===="; tail -n 200 build/tests-light.log; \
	for stacks in build/tests-*-stacks.txt; do \
		[ -s "$$stacks" ] && { echo "==== still running at $(TEST_BOUND_S) s: $$stacks ===="; cat "$$stacks"; }; \
	done; \
	exit $$status

# The edit loop: no real scheduler, no JVM, no multi-process runs (those are marked slow or spark); stops at
# the first failure and runs the last failures first. `make test` stays the whole suite.
test-fast: $(VENV)/.installed-test
	$(VENV)/bin/python -m pytest tests -m "not slow and not spark" -x -q --ff

# The Delta leases React app (provider/plugins/ui_app) -> provider/plugins/static/delta-leases.js, which is
# committed: installing or testing the provider needs no Node. Rebuild after changing ui_app/src (needs npm).
ui-bundle:
	cd provider/plugins/ui_app && npm ci --no-audit --no-fund && npm run build

# The documentation site (Sphinx + myst-parser) in build/docs; warnings (a broken link or include) fail it.
docs: $(VENV)/.installed-test
	$(VENV)/bin/sphinx-build -q -W --keep-going -b html docs build/docs
	@echo "open build/docs/index.html"

# A wheel and an sdist in dist/, built in an isolated environment as a release would be.
dist: $(PY)
	rm -rf dist
	$(UV) build -o dist . || $(PY) -m pip wheel --no-deps -w dist .

clean:
	rm -rf $(VENV) build dist *.egg-info airflow_home
