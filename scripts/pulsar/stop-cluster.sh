#!/usr/bin/env bash
# Stop what start-cluster.sh started: each PID under RUN_DIR/pids (brokers first, then ZooKeeper + bookie),
# SIGTERM then SIGKILL after a grace period, and remove the brokers' cgroups.
# usage: scripts/pulsar/stop-cluster.sh [--run-dir DIR]
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RUN_DIR="$(cd "$HERE/../.." && pwd)/build/pulsar/run"
[ "${1:-}" = "--run-dir" ] && RUN_DIR="$2"
[ -d "$RUN_DIR/pids" ] || { echo "stop-cluster: no $RUN_DIR/pids"; exit 0; }
stop_pid() {  # name pidfile
  local pid; pid=$(cat "$2")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { echo "stop-cluster: $1 ($pid) still up after 30 s: SIGKILL"; kill -KILL "$pid"; sleep 1; }
    echo "stopped $1 ($pid)"
  fi
  rm -f "$2"
}
for f in "$RUN_DIR"/pids/*.pid; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .pid)
  [ "$name" = zk-bookie ] && continue
  stop_pid "$name" "$f" &
done
wait
[ -e "$RUN_DIR/pids/zk-bookie.pid" ] && stop_pid zk-bookie "$RUN_DIR/pids/zk-bookie.pid"
for f in "$RUN_DIR"/pids/*.cgroups; do
  [ -e "$f" ] || continue
  while read -r cg; do [ -n "$cg" ] && rmdir "$cg" 2>/dev/null; done < "$f"
  rm -f "$f"
done
exit 0
