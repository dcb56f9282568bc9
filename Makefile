PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow parity bench docs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -e '.[test]'
	touch $(STAMP)

## make demo: run every experiment (quick mode) and write out/report/report.md with figures
demo: $(STAMP)
	$(BIN)/grpojax reproduce --quick --out out/report

## make test: the default test suite (under 15 minutes on 2 CPU cores)
test: $(STAMP)
	@$(BIN)/python -m pytest -n 2 -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

## make test-slow: the statistical and end-to-end checks that are too long for CI
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

## make parity: install torch + transformers reference and run the live parity tests
parity: $(STAMP)
	$(BIN)/pip install -e '.[test,bench]'
	$(BIN)/python -m pytest -q -m torch

## make docs: build the documentation site into out/site (mkdocs + mkdocstrings, no network needed)
docs: $(STAMP)
	$(BIN)/pip install -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir out/site

bench: $(STAMP)
	$(BIN)/pip install -e '.[test,bench]'
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) out
