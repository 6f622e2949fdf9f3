#!/usr/bin/env bash
# The live end-to-end test (`make test-pulsar`, trimmed: `make test-pulsar-trimmed`):
#   start a real cluster (start-cluster.sh), record it with `lbreplay collect` while skewed producer traffic runs
#   (traffic.py; collect --leader-log-dir keeps the brokers' load-balancer lines), stop everything by PID, then
#   ingest, validate, replay
#   --mode observed with the brokers' broker.conf and compare the audit with the leader (compare_leader.py).
# usage: scripts/pulsar/live-test.sh [--minutes 15] [--brokers 3] [--work DIR] [--load-manager modular]
#            [--conf-overlay FILE] [--schedule FILE] [--no-audit]
#   (TRAFFIC_ARGS: extra flags for traffic.py, e.g. "--hot-rate 400 --tail-rate 150"; PULSAR_VERSION: the release
#   the brokers run, default 4.0.7, e.g. PULSAR_VERSION=3.0.7 with --conf-overlay scripts/pulsar/topologies/round-robin-3.0.conf)
#   --conf-overlay: broker.conf keys of this run (start-cluster.sh --conf-overlay); --schedule: a traffic.py schedule
#   (YAML), which also sets the minutes, the brokers at the start and the events: a broker joining (started at its
#   offset), a broker SIGKILLed (by PID), logged in WORK/events.log; --no-audit: record only (no compare_leader.py).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MINUTES=15; BROKERS=3; WORK="$ROOT/build/pulsar/live"; LM=modular; OVERLAY=(); SCHEDULE=""; AUDIT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES="$2"; shift 2 ;;
    --brokers) BROKERS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --load-manager) LM="$2"; shift 2 ;;
    --conf-overlay) OVERLAY=(--conf-overlay "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    --schedule) SCHEDULE="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --no-audit) AUDIT=0; shift ;;
    *) echo "live-test: unknown argument $1" >&2; exit 2 ;;
  esac
done
WORK="$(mkdir -p "$WORK" && cd "$WORK" && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
LBREPLAY=("$PY" -m lbreplay.cli)
RUN="$WORK/run"; DUMP="$WORK/dump"
rm -rf "$DUMP" "$WORK/lake" "$WORK/report" "$WORK/resources.log" "$WORK/events.log"; mkdir -p "$WORK" "$DUMP"
DEFERRED=0; EVENTS=""
if [ -n "$SCHEDULE" ]; then  # the schedule sets the length, the brokers at the start and who joins later
  read -r INITIAL MINUTES < <("$PY" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1]))
print(d["brokers"]["initial"], d["minutes"])' "$SCHEDULE")
  EVENTS=$("$PY" "$HERE/traffic.py" --schedule "$SCHEDULE" --print-events)
  DEFERRED=$(grep -c ' join ' <<< "$EVENTS" || true)
  BROKERS=$((INITIAL + DEFERRED))
fi
stop_pid() {  # SIGTERM, up to $2 s to exit, then SIGKILL (the Pulsar client can sit in a send and ignore SIGTERM)
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 "$2"); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
}
cleanup() {  # stop every process this script started, by PID (never fails: runs from the EXIT trap)
  set +e
  for p in events traffic collect; do
    f="$WORK/$p.pid"; [ -f "$f" ] || continue
    stop_pid "$(cat "$f")" 60; rm -f "$f"
  done
  "$HERE/stop-cluster.sh" --run-dir "$RUN"
}
trap cleanup EXIT
non_leader() {  # the lowest-numbered running broker that does not lead (the leader from any running broker)
  local f url leader=""
  for f in "$RUN"/pids/broker-*.pid; do
    url="http://127.0.0.1:$((18080 + $(basename "$f" .pid | tr -dc 0-9)))"
    leader=$(curl -fsS "$url/admin/v2/brokers/leaderBroker" 2>/dev/null | "$PY" -c \
      'import json, sys; print(json.load(sys.stdin)["serviceUrl"].rsplit(":", 1)[1])') && break
  done
  for f in $(ls "$RUN"/pids/broker-*.pid | sort -V); do
    n=$(basename "$f" .pid | tr -dc 0-9)
    [ "$((18080 + n))" != "$leader" ] && { echo "$n"; return 0; }
  done
  return 1
}
run_events() {  # t0 (epoch s): each schedule event at its offset; one line per event in $WORK/events.log
  local at action broker wait pid
  while read -r at action broker; do
    [ -n "$at" ] || continue
    wait=$(awk -v a="$at" -v t0="$1" -v n="$(date +%s.%N)" 'BEGIN { d = t0 + a - n; print (d > 0 ? d : 0) }')
    sleep "$wait"
    case "$action" in
      join) echo "$(date -u +%FT%T.%3NZ) +${at}s join broker-$broker (starting)" >> "$WORK/events.log"
            "$HERE/start-cluster.sh" --run-dir "$RUN" --only-broker "$broker" >> "$WORK/events.log" 2>&1 ;;
      kill) [ "$broker" = non-leader ] && broker=$(non_leader)
            pid=$(cat "$RUN/pids/broker-$broker.pid"); kill -KILL "$pid"; rm -f "$RUN/pids/broker-$broker.pid"
            echo "$(date -u +%FT%T.%3NZ) +${at}s SIGKILL broker-$broker (pid $pid," \
              "127.0.0.1:$((18080 + broker)))" >> "$WORK/events.log" ;;
    esac
  done <<< "$EVENTS"
}
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
"$HERE/start-cluster.sh" --run-dir "$RUN" --brokers "$BROKERS" --load-manager "$LM" --deferred "$DEFERRED" \
  "${OVERLAY[@]}"
ADMIN=(); for u in $(cat "$RUN/admin-urls.txt"); do ADMIN+=(--admin-url "$u"); done
EXT=(); [ "$LM" = extensible ] && EXT=(--service-url pulsar://127.0.0.1:16651)
# the brokers' logs under their ids (broker-N.log is 127.0.0.1:<18080+N>): collect gathers every broker's
# load-balancer lines (whoever leads) into $DUMP/leader-decisions.log, each prefixed with the broker's id
LOGS="$WORK/leader-logs"; rm -rf "$LOGS"; mkdir -p "$LOGS"
for i in $(seq 1 "$BROKERS"); do  # a joining broker's log appears when it starts
  ln -s "$RUN/logs/broker-$i.log" "$LOGS/127.0.0.1_$((18080 + i)).log"
done
"${LBREPLAY[@]}" collect --out "$DUMP" "${ADMIN[@]}" "${EXT[@]}" --metadata-store "$(cat "$RUN/metadata-store.txt")" \
  --cluster "$(cat "$RUN/cluster.txt")" --interval 60 --duration "$((MINUTES + 1))m" --leader-log-dir "$LOGS" \
  > "$WORK/collect.log" 2>&1 &
echo $! > "$WORK/collect.pid"
sleep 5
SCHED=(); SERVICE=pulsar://127.0.0.1:16651
if [ -n "$SCHEDULE" ]; then  # every broker at the start in the client's service URL: a SIGKILLed one is not the only
  SCHED=(--schedule "$SCHEDULE")  # broker the client looks its topics up on
  SERVICE="pulsar://$(seq -s, -f '127.0.0.1:%g' $((16651)) $((16650 + INITIAL)))"
fi
"$PY" "$HERE/traffic.py" --admin-url "$(head -1 "$RUN/admin-urls.txt")" --service-url "$SERVICE" \
  --cluster "$(cat "$RUN/cluster.txt")" "${SCHED[@]}" ${TRAFFIC_ARGS:-} > "$WORK/traffic.log" 2>&1 &
echo $! > "$WORK/traffic.pid"
if [ -n "$EVENTS" ]; then
  run_events "$(date +%s.%N)" &
  echo $! > "$WORK/events.pid"
fi
echo "live-test: recording $MINUTES min (+1) into $DUMP (collect log: $WORK/collect.log)"
# resource use of the cluster, sampled once a minute (RSS MiB and CPU seconds per process)
while kill -0 "$(cat "$WORK/collect.pid")" 2>/dev/null; do
  for f in "$RUN"/pids/*.pid; do
    pid=$(cat "$f"); n=$(basename "$f" .pid)
    [ -r "/proc/$pid/stat" ] && awk -v n="$n" -v t="$(date +%s)" -v hz="$(getconf CLK_TCK)" \
      '{ printf "%s %s cpu_s=%.1f\n", t, n, ($14+$15)/hz }' "/proc/$pid/stat" && \
      awk -v n="$n" '/VmRSS/ { printf "  %s rss_mib=%d\n", n, $2/1024 }' "/proc/$pid/status"
  done >> "$WORK/resources.log"
  echo "$(date +%s) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$WORK/resources.log"
  sleep 60 & wait $!
done
wait "$(cat "$WORK/collect.pid")" 2>/dev/null || true; rm -f "$WORK/collect.pid"
stop_pid "$(cat "$WORK/traffic.pid")" 15; rm -f "$WORK/traffic.pid"
[ -f "$WORK/events.pid" ] && { stop_pid "$(cat "$WORK/events.pid")" 5; rm -f "$WORK/events.pid"; }
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
[ "$AUDIT" = 1 ] || exit 0
"$PY" "$HERE/compare_leader.py" --dump "$DUMP" --work "$WORK" --cluster live
