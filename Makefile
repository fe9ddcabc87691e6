# Every target bootstraps .venv on a fresh machine (Python 3.11 + pip are all it needs).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo references lint test test-slow test-browser docs bench clean install

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,dask,bench,gallery,docs,browser]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m bayeszoo.demo --out runs/demo

# rebuilds bayeszoo/catalogue/data (two long runs per problem; about an hour on two cores)
references: $(STAMP)
	$(BIN)/python -m bayeszoo.studies.build_catalogue

# the layer contracts (pyproject.toml); bayeszoo/models, bayeszoo/inference and bayeszoo/diagnostics are links to the
# top-level folders, so import-linter, which walks bayeszoo/, sees every module (no cache: a cached graph can name
# modules that have moved)
lint: $(STAMP)
	$(BIN)/lint-imports --no-cache

# the default suite on one worker per core (pytest-xdist; a file's tests stay on one worker, so that its module
# fixtures are made once); TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= auto
test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# the demo reports and the documentation site in headless Chromium (Debian's chromium + chromium-driver)
test-browser: $(STAMP)
	$(BIN)/python -m pytest -q -m browser

# the documentation site, gallery notebooks executed, into docs/_build/html; offline, a warning is an error.
# NB_EXECUTION=off shows the outputs saved in the notebooks instead (CI: `make test-slow` executes them)
NB_EXECUTION ?= cache
docs: $(STAMP)
	$(BIN)/python -m sphinx -W --keep-going -b html -D nb_execution_mode=$(NB_EXECUTION) docs docs/_build/html

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) runs build dist .import_linter_cache *.egg-info docs/_build
