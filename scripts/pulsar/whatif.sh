#!/usr/bin/env bash
# The what-if experiment (`make test-whatif`, issue 33): one seeded schedule (scripts/pulsar/whatif/schedule.yaml:
# topics, rates, hot phases, a broker joining, one SIGKILLed, every time fixed relative to the start) run on a real
# cluster under config A and under config B (scripts/pulsar/whatif/A.conf, B.conf: broker.conf overlays), each
# config twice (A-1, B-1, A-2, B-2: two real runs of one config give the noise band). Each run is recorded by
# `lbreplay collect --leader-log-dir` (scripts/pulsar/live-test.sh), then ingested, validated, audited
# (replay --mode observed with its broker.conf) and compared with its leader (compare_leader.py); then B is
# predicted from A-1's recording and compared with the real B runs (whatif_predict.sh).
# usage: scripts/pulsar/whatif.sh [--runs "A-1 B-1 A-2 B-2"] [--work DIR] [--no-audit] [--no-predict]
# Each run's recording is WORK/<run>/dump, its audit WORK/<run>/report; WORK/summary.txt: one line per run (its
# audit's agreement with its leader and compare_leader's exit code) and the prediction's verdict. Exit 1 when a
# recording or the prediction could not be made; an audit below compare_leader's bar is reported, not fatal (the
# live topologies' own tests judge the audit: make test-pulsar).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUNS="A-1 B-1 A-2 B-2"; WORK="$ROOT/build/pulsar/whatif"; AUDIT=1; PREDICT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --no-audit) AUDIT=0; shift ;;
    --no-predict) PREDICT=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "whatif: unknown argument $1" >&2; exit 2 ;;
  esac
done
for run in $RUNS; do
  [[ "$run" =~ ^[A-Za-z0-9]+-[0-9]+$ ]] && [ -f "$HERE/whatif/${run%-*}.conf" ] || {
    echo "whatif: run $run: want <config>-<n> with scripts/pulsar/whatif/<config>.conf" >&2; exit 2; }
done
mkdir -p "$WORK"; WORK="$(cd "$WORK" && pwd)"
status=0
PY="${PYTHON:-$ROOT/.venv/bin/python}"
for run in $RUNS; do
  t0=$(date +%s)
  echo "whatif: $run (config ${run%-*}) from $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  rc=0
  "$HERE/live-test.sh" --schedule "$HERE/whatif/schedule.yaml" --conf-overlay "$HERE/whatif/${run%-*}.conf" \
    --work "$WORK/$run" --no-audit || rc=$?
  audit="not audited"
  if [ "$rc" = 0 ] && [ "$AUDIT" = 1 ]; then
    arc=0
    "$PY" "$HERE/compare_leader.py" --dump "$WORK/$run/dump" --work "$WORK/$run" --cluster live \
      > "$WORK/$run/compare.log" 2>&1 || arc=$?
    agreement=$(sed -n 's/^AGREEMENT: \(matched [0-9]*\/[0-9]*\) of the leader.s decisions \(([0-9]* %)\).*/\1 \2/p' \
      "$WORK/$run/compare.log" | head -1)
    audit="audit: ${agreement:-not compared} (compare_leader exit $arc)"
  fi
  line="$run rc=$rc wall=$(( $(date +%s) - t0 ))s load=$(cut -d' ' -f1-3 /proc/loadavg) $audit"
  echo "whatif: $line"; echo "$line" >> "$WORK/summary.txt"
  [ "$rc" = 0 ] || status=1
done
if [ "$PREDICT" = 1 ] && [ "$status" = 0 ]; then
  if ls "$WORK"/{A-1,A-2,B-1,B-2}/dump/broker.conf >/dev/null 2>&1; then
    "$HERE/whatif_predict.sh" --work "$WORK" || status=1
  else
    echo "whatif: no prediction: it needs the recordings A-1 A-2 B-1 B-2 in $WORK" | tee -a "$WORK/summary.txt"
  fi
fi
exit $status
