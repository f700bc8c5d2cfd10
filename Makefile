# Two commands on a fresh machine with Python >= 3.10:
#   make demo   builds .venv, installs, ingests samples/ into the embedded store, searches it
#   make test   builds .venv, installs, runs the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint clean

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

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .surrealdocs .pytest_cache .mypy_cache .ruff_cache
