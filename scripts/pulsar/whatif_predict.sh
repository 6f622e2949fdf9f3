#!/usr/bin/env bash
# The what-if experiment's prediction (the last step of scripts/pulsar/whatif.sh, issue 33 items 2-3), with the
# commands an operator runs: each recording WORK/<run>/dump ingested into one lake (WORK/lake, cluster <run>),
# validated and audited (replay --mode observed with its broker.conf, run id <run>-audit); the closed loop of
# A-1's recording under B-1's broker.conf once per seed (replay --seeds, run ids pred-B-s<seed>); then
# `lbreplay prediction` (the seeds' median and range as predicted B vs real B vs the noise of B-2, real A) and
# `lbreplay report --prediction` (WORK/prediction.html).
# usage: scripts/pulsar/whatif_predict.sh [--work DIR] [--a A-1] [--a2 A-2] [--b B-1] [--b2 B-2] [--seeds 0-4]
# Exit 0 when every step ran (the prediction's verdict, `Targets: met` or the misses, is in WORK/prediction.txt
# and WORK/summary.txt); 1 when a step failed.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$ROOT/build/pulsar/whatif"; A=A-1; A2=A-2; B=B-1; B2=B-2; SEEDS=0-4
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK="$2"; shift 2 ;;
    --a) A="$2"; shift 2 ;;
    --a2) A2="$2"; shift 2 ;;
    --b) B="$2"; shift 2 ;;
    --b2) B2="$2"; shift 2 ;;
    --seeds) SEEDS="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "whatif-predict: unknown argument $1" >&2; exit 2 ;;
  esac
done
WORK="$(cd "$WORK" && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
LAKE="$WORK/lake"
lb() { "$PY" -m lbreplay.cli "$@"; }
# one Spark start for the lake's commands (the lake's warm server; stopped on exit)
export LBREPLAY_WARM="${LBREPLAY_WARM:-1}"
trap 'lb server stop --lake "$LAKE" >/dev/null 2>&1 || true' EXIT
for run in "$A" "$A2" "$B" "$B2"; do
  [ -f "$WORK/$run/dump/broker.conf" ] || { echo "whatif-predict: no recording $WORK/$run/dump (broker.conf)" >&2; exit 1; }
done
lb server stop --lake "$LAKE" >/dev/null 2>&1 || true  # a server of an earlier run holds the lake
rm -rf "$LAKE"
for run in "$A" "$A2" "$B" "$B2"; do
  lb ingest --lake "$LAKE" --source "$WORK/$run/dump" --cluster "$run" --quiet
  lb validate --lake "$LAKE" --cluster "$run" --quiet
  lb replay --lake "$LAKE" --cluster "$run" --mode observed --broker-conf "$WORK/$run/dump/broker.conf" \
    --run-id "$run-audit" --quiet
done
# one closed loop per seed, in one Spark job: Pulsar's random choices differ by seed, the prediction is their median
PRED=$(lb replay --lake "$LAKE" --cluster "$A" --mode closed-loop --broker-conf "$WORK/$B/dump/broker.conf" \
  --run-id pred-B --seeds "$SEEDS" --quiet | paste -sd+ -)
RUNS="$PRED,$B-audit,$B2-audit,$A-audit,$A2-audit"
rc=0
lb prediction --lake "$LAKE" --runs "$RUNS" > "$WORK/prediction.txt" || rc=$?
cat "$WORK/prediction.txt"
[ "$rc" -le 1 ] || { echo "whatif-predict: prediction failed (exit $rc)" >&2; exit 1; }
lb report --lake "$LAKE" --runs "${RUNS//+/,}" --prediction "$RUNS" --out "$WORK/prediction.html"
verdict=$(grep -m1 '^Targets:' "$WORK/prediction.txt" || echo "Targets: (no verdict printed)")
echo "prediction pred-B, seeds $SEEDS ($A under $B's broker.conf): $verdict" | tee -a "$WORK/summary.txt"
