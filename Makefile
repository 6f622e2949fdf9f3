# The README's two commands: `make demo` and `make test`. Each installs everything it needs itself.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install warm demo test bench clean

$(STAMP): setup.cfg pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	@command -v java >/dev/null 2>&1 || { echo "need Java 17 (java on PATH)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# First Spark start: resolves Delta's jars from Maven Central into ~/.cache/lbreplay (once).
warm: install
	$(BIN)/python -m lbreplay.warm

demo: warm
	$(BIN)/lbreplay demo

test: warm
	$(BIN)/python -m pytest -q tests

bench: install
	$(BIN)/python bench/kernel_tick.py

clean:
	rm -rf $(VENV) data/lake
