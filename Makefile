# The README's two commands: `make demo` and `make test`. Each installs everything it needs itself.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install warm demo test lint bench clean browser

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

test: lint warm browser
	$(BIN)/python -m pytest -q tests
	$(MAKE) test-airflow

# ruff (pyproject.toml) and mypy (setup.cfg) with zero findings on lib/, then the layering and size check.
lint: install
	$(BIN)/ruff check lib
	$(BIN)/mypy
	$(BIN)/python -m lbreplay.devtools.imports

# Headless Chromium for the report's browser test (Debian's package; sudo only when not root).
browser:
	@command -v chromium >/dev/null 2>&1 || { SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

bench: install
	$(BIN)/python bench/kernel_tick.py

clean:
	rm -rf $(VENV) data/lake
	rm -rf $(AIRFLOW_VENV)

# Airflow lives in its own environment (its dependency set conflicts with pyspark 4.1): exact pins in
# airflow/requirements-airflow.txt. Its tests parse the DAG and run it end to end with dag.test(); the
# DAG's tasks spark-submit the jobs with the project's environment, hence `warm` first.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

.PHONY: airflow-venv test-airflow

$(AIRFLOW_STAMP): airflow/requirements-airflow.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --upgrade pip >/dev/null
	$(AIRFLOW_VENV)/bin/pip install -r airflow/requirements-airflow.txt
	touch $(AIRFLOW_STAMP)

airflow-venv: $(AIRFLOW_STAMP)

test-airflow: warm airflow-venv
	$(AIRFLOW_VENV)/bin/python -m pytest -q tests_airflow
