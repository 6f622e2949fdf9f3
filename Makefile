# The README's two commands: `make demo` and `make test`. Each installs everything it needs itself.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install warm demo test lint bench clean browser test-pulsar test-pulsar-trimmed test-whatif

$(STAMP): setup.cfg pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	@command -v java >/dev/null 2>&1 || { echo "need Java 17 (java on PATH)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# First Spark start: resolves Delta's jars from Maven Central into ~/.cache/lbreplay and dumps the driver's class
# archive (once per install: the stamp spares later targets of the same run a Spark start).
WARM_STAMP := $(VENV)/.warmed
$(WARM_STAMP): $(STAMP)
	$(BIN)/python -m lbreplay.warm
	touch $(WARM_STAMP)

warm: $(WARM_STAMP)

demo: warm
	$(BIN)/lbreplay demo

# The Airflow tests run here directly, not through `$(MAKE) test-airflow`: a sub-make would run `warm` (a Spark
# start) a second time.
test: lint warm browser maven airflow-venv
	$(BIN)/python -m pytest -q --durations=25 tests
	$(AIRFLOW_VENV)/bin/python -m pytest -q tests_airflow

# ruff (pyproject.toml) and mypy (setup.cfg) with zero findings on lib/, then the layering and size check.
lint: install
	$(BIN)/ruff check lib
	$(BIN)/mypy
	$(BIN)/python -m lbreplay.devtools.imports

# Headless Chromium for the report's browser test (Debian's package; sudo only when not root).
browser:
	@command -v chromium >/dev/null 2>&1 || { SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

# A real Pulsar cluster (Maven Central jars, needs java + mvn), recorded by `lbreplay collect` and audited:
# the audit's UNLOAD/SPLIT decisions compared with the leader's log (scripts/pulsar/live-test.sh), once with the
# modular load manager (ThresholdShedder) and once with the extensible one (TransferShedder).
test-pulsar: warm
	PYTHON=$(abspath $(BIN))/python scripts/pulsar/live-test.sh --minutes 15
	PYTHON=$(abspath $(BIN))/python scripts/pulsar/live-test.sh --minutes 15 --load-manager extensible \
	  --work build/pulsar/live-extensible

test-pulsar-trimmed: warm
	PYTHON=$(abspath $(BIN))/python scripts/pulsar/live-test.sh --minutes 7 --work build/pulsar/live-trimmed
	PYTHON=$(abspath $(BIN))/python scripts/pulsar/live-test.sh --minutes 5 --load-manager extensible \
	  --work build/pulsar/live-extensible-trimmed

# The what-if experiment (issue 33, scripts/pulsar/whatif.sh): one seeded schedule (scripts/pulsar/whatif/) on a real
# 4-broker cluster (one joins, one is SIGKILLed) under config A and config B, each twice (A-1 B-1 A-2 B-2), each run
# recorded by collect, audited and compared with its leader; then B predicted from A-1's recording and compared with the
# real B runs (scripts/pulsar/whatif_predict.sh: lbreplay prediction, report --prediction). About 13 minutes per
# run and 10 for the prediction; not in CI (the committed runs' test is: tests/report/test_whatif_pairs.py).
test-whatif: warm
	PYTHON=$(abspath $(BIN))/python scripts/pulsar/whatif.sh

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

# Concurrency, crash safety and execution-shape determinism, long variant: 10 seeded kill -9 points per command
# (`make test` runs the same module with 1 point per command; see tests/test_reliability.py).
.PHONY: test-crash
test-crash: warm
	LBREPLAY_CRASH_POINTS=10 $(BIN)/python -m pytest -q tests/test_reliability.py

# Differential oracle (issue 16): Pulsar's real classes (tests/pulsar_oracle, built by Maven from Maven Central)
# against the kernel. `make verify` is the long run; the 500-cases-per-strategy variant runs in `make test`.
VERIFY_VERSION ?= 5.0
VERIFY_CASES ?= 20000
VERIFY_SEED ?= 1

.PHONY: maven verify

# Maven builds the oracle (Debian's package; sudo only when not root).
maven:
	@command -v mvn >/dev/null 2>&1 || { SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y maven; }

verify: install maven
	$(BIN)/lbreplay verify --pulsar-version $(VERIFY_VERSION) --cases $(VERIFY_CASES) --seed $(VERIFY_SEED)

# Scale and speed (issue 15). Figures are JSON lines; each prints the load average (shared machines are noisy).
.PHONY: bench-floor bench-generate bench-week test-cluster
SIZE ?= S
SIZES ?= S,M

# The kernel's closed loop vs its vectorised NumPy floor over one prepared tick stream (decisions must agree).
bench-floor: warm
	$(BIN)/python bench/floor.py --size $(SIZE)

# `generate` then `validate` per size of the `large` scenario: generate_s, validate_s, plain_scan_s and ratio
# (validate / one plain scan of the same tables, same run) vs the targets (M: generate <= 90 s, validate <= 90 s
# and <= 3x the scan; L: generate <= 10 min). TICKS=N shortens the history.
bench-generate: warm
	$(BIN)/python bench/generate.py --sizes $(SIZES) $(if $(TICKS),--ticks $(TICKS))

# A 7-day and a 1-day history (`heterogeneous`, size WEEK_SIZE) replayed closed loop in one process:
# replay_ratio (week / day, target <= 7.5) and rss_ratio (task peak RSS, target <= 1.2). ~20 min at M.
WEEK_SIZE ?= M
bench-week: warm
	$(BIN)/python bench/history_week.py --size $(WEEK_SIZE)

# Cold (LBREPLAY_WARM=0) and warm (the lake's warm command server) `lbreplay sql` and `replay` processes on an S
# lake (generated into BENCH_LAKE first if it is none): seconds per command and the ratio warm / cold (target: warm
# <= 3 s to start work). A few minutes.
BENCH_LAKE ?= data/bench-interactive-lake
BENCH_CLUSTER ?= bench-s
.PHONY: bench-interactive
bench-interactive: warm
	$(BIN)/python bench/interactive.py --lake $(BENCH_LAKE) --cluster $(BENCH_CLUSTER) --generate

# A Spark standalone master + 2 workers (one JVM each, 127.0.0.1), the jobs spark-submitted onto them with the
# executors in make dist's packed environment (probed: their Python and modules come from the unpacked archive),
# a 4-run sweep spread over both executors whose decision hashes must equal those of the same sweep on local[2].
test-cluster: warm dist
	$(BIN)/python scripts/spark-cluster/test_cluster.py

# For spark-submit onto a cluster: dist/lbreplay-<version>-py3-none-any.whl and dist/lbreplay-env.tar.gz, a packed
# environment of the wheel + requirements-lock.txt (pyspark and py4j left out: the cluster's Spark provides them)
# for --archives dist/lbreplay-env.tar.gz#environment. `make lock` rewrites the lock from the installed closure.
.PHONY: dist lock
dist: install
	$(BIN)/python scripts/spark-cluster/pack_env.py dist

lock: install
	$(BIN)/python scripts/spark-cluster/pack_env.py lock
