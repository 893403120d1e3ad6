# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv

.PHONY: demo test lint typecheck install install-test delta-jars docs dist clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv

# uv resolves and installs in seconds; fall back to pip where uv is unavailable.
$(VENV)/.installed: setup.cfg pyproject.toml | $(PY)
	$(UV) pip install --python $(PY) -e . || $(PY) -m pip install -e .
	touch $@

$(VENV)/.installed-test: setup.cfg pyproject.toml | $(PY)
	$(UV) pip install --python $(PY) -e . --group test || $(PY) -m pip install -e . --group test
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Delta Lake's Spark jars for the installed pyspark/delta-spark wheels, copied once by Maven into the venv,
# where every Spark session deltaguard creates finds them.
DELTA_JARS := $(VENV)/delta-jars
$(DELTA_JARS)/.fetched: $(VENV)/.installed-test
	$(PY) -m deltaguard.engines.spark.jars --dest $(DELTA_JARS)
	touch $@
delta-jars: $(DELTA_JARS)/.fetched

# The Spark pipeline (delta-spark over a local Spark Connect server) by default; `make demo ENGINE=delta-rs`
# runs the delta-rs one.
ENGINE ?= spark
demo: $(VENV)/.installed-test $(DELTA_JARS)/.fetched
	$(VENV)/bin/python -m benchmarks.demo --engine $(ENGINE)

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check provider operators sensors dags_examples tests benchmarks
	$(VENV)/bin/ruff format --check provider operators sensors dags_examples tests benchmarks

# mypy cannot follow setup.cfg's folder mapping, so it checks a hard-linked copy laid out as the
# installed package; otherwise every deltaguard import would silently become Any.
typecheck: $(VENV)/.installed-test
	rm -rf build/typecheck && mkdir -p build/typecheck && cp -al provider build/typecheck/deltaguard
	cd build/typecheck && ../../$(VENV)/bin/mypy --config-file ../../pyproject.toml -p deltaguard.core

test: $(VENV)/.installed-test $(DELTA_JARS)/.fetched lint typecheck
	$(VENV)/bin/python -m pytest tests

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
