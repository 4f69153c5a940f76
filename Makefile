# countersign: `make demo` runs the main job on our samples, `make test` the whole suite.
# Both create .venv on first use (Python 3.11 or newer) and reuse it afterwards.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   ?= build/demo-ledger

.PHONY: demo test bench clean

# The editable install compiles ledger/_native.c (hatch_build.py): a change to either rebuilds it.
# `make demo` installs the core and the few packages of `countersign serve`; `make test` adds the
# extras the tests use (Playwright for the browser tests, the parser oracles, the test client).
$(STAMP): pyproject.toml hatch_build.py ledger/_native.c
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "countersign needs Python 3.11 or newer; set PYTHON=...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[serve]'
	@$(BIN)/python -c 'from ledger.store import native; print("countersign: the compiled verifier is " + ("built" if native.available() else "not built: ledger verify uses the Python verifier (pip install -v -e . shows why)"))'
	@touch $@

TEST_STAMP := $(VENV)/.installed-test

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

demo: $(STAMP)
	@rm -rf $(DEMO)
	$(BIN)/countersign simulate --policy samples/retail.policy --calls samples/demo-calls.jsonl \
		--reviewer samples/demo-reviewer.json --ledger $(DEMO)
	$(BIN)/countersign ledger verify $(DEMO)
	$(BIN)/countersign ledger stats $(DEMO)

# The timing ratios (tests/test_linear_time.py) run in a process of their own: see its docstring.
test: $(TEST_STAMP)
	$(BIN)/python -m pytest --ignore=tests/test_linear_time.py
	$(BIN)/python -m pytest tests/test_linear_time.py

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(TEST_STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $@

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist .pytest_cache .hypothesis ledger/_native*.so
