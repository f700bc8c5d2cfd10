# Two commands on a fresh machine with Python >= 3.10:
#   make demo   builds .venv, installs, ingests samples/ into the embedded store, searches it
#   make test   builds .venv, installs, runs the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/surrealdocs ingest samples/
	$(BIN)/surrealdocs search "how does the engine find similar vectors quickly" --limit 3
	$(BIN)/surrealdocs search "BM25 ranking" --mode text --limit 3
	$(BIN)/surrealdocs stats

test: $(STAMP)
	$(BIN)/python -m pytest -q

# the tests not marked slow (no subprocesses, servers, browser, crashes or real corpora)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# the quick benchmarks (under a minute, no ../shared needed); the others: bench/README.md
bench: $(STAMP)
	$(BIN)/python bench/text_index_writes.py --documents 300
	$(BIN)/python bench/engine/engine_bm25_limit.py --rows 5000 --runs 3

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .surrealdocs .pytest_cache .mypy_cache .ruff_cache
