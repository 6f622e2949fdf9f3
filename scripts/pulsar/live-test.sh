#!/usr/bin/env bash
# The live end-to-end test (`make test-pulsar`, trimmed: `make test-pulsar-trimmed`):
#   start a real cluster (start-cluster.sh), record it with `lbreplay collect` while skewed producer traffic runs
#   (traffic.py; collect --leader-log-dir keeps the brokers' load-balancer lines), stop everything by PID, then
#   ingest, validate, replay
#   --mode observed with the brokers' broker.conf and compare the audit with the leader (compare_leader.py).
# usage: scripts/pulsar/live-test.sh [--minutes 15] [--brokers 3] [--work DIR] [--load-manager modular]
#   (TRAFFIC_ARGS: extra flags for traffic.py, e.g. "--hot-rate 400 --tail-rate 150")
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MINUTES=15; BROKERS=3; WORK="$ROOT/build/pulsar/live"; LM=modular
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES="$2"; shift 2 ;;
    --brokers) BROKERS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --load-manager) LM="$2"; shift 2 ;;
    *) echo "live-test: unknown argument $1" >&2; exit 2 ;;
  esac
done
WORK="$(mkdir -p "$WORK" && cd "$WORK" && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
LBREPLAY=("$PY" -m lbreplay.cli)
RUN="$WORK/run"; DUMP="$WORK/dump"
rm -rf "$DUMP" "$WORK/lake" "$WORK/report" "$WORK/resources.log"; mkdir -p "$WORK" "$DUMP"
stop_pid() {  # SIGTERM, up to $2 s to exit, then SIGKILL (the Pulsar client can sit in a send and ignore SIGTERM)
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 "$2"); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
}
cleanup() {  # stop every process this script started, by PID (never fails: runs from the EXIT trap)
  set +e
  for p in traffic collect; do
    f="$WORK/$p.pid"; [ -f "$f" ] || continue
    stop_pid "$(cat "$f")" 60; rm -f "$f"
  done
  "$HERE/stop-cluster.sh" --run-dir "$RUN"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
T0=$(date +%s)
# the bookie turns read-only above 95 % disk use (diskUsageThreshold), counted as 1 - usable / size (DiskChecker;
# df's Use% leaves out the reserved blocks): the traffic would fail mid-recording
used=$(df -P -B1 "$WORK" | awk 'NR == 2 { printf "%d", 100 * (1 - $4 / $2) }')
if [ "${used:-0}" -ge 90 ]; then
  echo "live-test: $WORK's filesystem is ${used}% used as the bookie counts it (1 - usable / size); it stops" \
    "writing at 95 %: free some space" >&2
  exit 2
fi
"$HERE/start-cluster.sh" --run-dir "$RUN" --brokers "$BROKERS" --load-manager "$LM"
ADMIN=(); for u in $(cat "$RUN/admin-urls.txt"); do ADMIN+=(--admin-url "$u"); done
EXT=(); [ "$LM" = extensible ] && EXT=(--service-url pulsar://127.0.0.1:16651)
# the brokers' logs under their ids (broker-N.log is 127.0.0.1:<18080+N>): collect gathers every broker's
# load-balancer lines (whoever leads) into $DUMP/leader-decisions.log, each prefixed with the broker's id
LOGS="$WORK/leader-logs"; rm -rf "$LOGS"; mkdir -p "$LOGS"
for f in "$RUN"/logs/broker-*.log; do
  b=$(basename "$f" .log); ln -s "$f" "$LOGS/127.0.0.1_$((18080 + ${b#broker-})).log"
done
"${LBREPLAY[@]}" collect --out "$DUMP" "${ADMIN[@]}" "${EXT[@]}" --metadata-store "$(cat "$RUN/metadata-store.txt")" \
  --cluster "$(cat "$RUN/cluster.txt")" --interval 60 --duration "$((MINUTES + 1))m" --leader-log-dir "$LOGS" \
  > "$WORK/collect.log" 2>&1 &
echo $! > "$WORK/collect.pid"
sleep 5
"$PY" "$HERE/traffic.py" --admin-url "$(head -1 "$RUN/admin-urls.txt")" --service-url pulsar://127.0.0.1:16651 \
  --cluster "$(cat "$RUN/cluster.txt")" ${TRAFFIC_ARGS:-} > "$WORK/traffic.log" 2>&1 &
echo $! > "$WORK/traffic.pid"
echo "live-test: recording $MINUTES min (+1) into $DUMP (collect log: $WORK/collect.log)"
# resource use of the cluster, sampled once a minute (RSS MiB and CPU seconds per process)
while kill -0 "$(cat "$WORK/collect.pid")" 2>/dev/null; do
  for f in "$RUN"/pids/*.pid; do
    pid=$(cat "$f"); n=$(basename "$f" .pid)
    [ -r "/proc/$pid/stat" ] && awk -v n="$n" -v t="$(date +%s)" -v hz="$(getconf CLK_TCK)" \
      '{ printf "%s %s cpu_s=%.1f\n", t, n, ($14+$15)/hz }' "/proc/$pid/stat" && \
      awk -v n="$n" '/VmRSS/ { printf "  %s rss_mib=%d\n", n, $2/1024 }' "/proc/$pid/status"
  done >> "$WORK/resources.log"
  sleep 60 & wait $!
done
wait "$(cat "$WORK/collect.pid")" 2>/dev/null || true; rm -f "$WORK/collect.pid"
stop_pid "$(cat "$WORK/traffic.pid")" 15; rm -f "$WORK/traffic.pid"
[ -s "$DUMP/leader-decisions.log" ] || { echo "live-test: collect gathered no leader log lines (see $WORK/collect.log)" >&2; exit 1; }
cp "$RUN/conf/broker.conf" "$DUMP/broker.conf"
cat "$RUN/startup-seconds.txt" > "$WORK/startup-seconds.txt"
cleanup; trap - EXIT
rm -rf "$RUN/data"  # the bookie's ledgers and ZooKeeper's data (GBs per run); the dump is the recording
echo "live-test: cluster stopped; recorded $(find "$DUMP" -name '*.json' | wc -l) files in $(( $(date +%s) - T0 )) s"
# a bookie that turned read-only (disk) or failed stops the traffic: the brokers' loads drop while the owners'
# published bundle loads stay, so the recording no longer shows one cluster's load balancing
if faulty=$(grep -m1 "Not enough non-faulty bookies" "$WORK/traffic.log"); then
  echo "live-test: the cluster stopped storing messages (${faulty:0:23}: Not enough non-faulty bookies; see" \
    "$RUN/logs/zk-bookie.log): the recording is void" >&2
  exit 1
fi
"$PY" "$HERE/compare_leader.py" --dump "$DUMP" --work "$WORK" --cluster live
