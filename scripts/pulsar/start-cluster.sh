#!/usr/bin/env bash
# Start a small real Pulsar cluster on 127.0.0.1 from the Maven Central jars (see docs/user-guide.md, "Record a cluster"):
#   one JVM with ZooKeeper + one bookie (PulsarStandaloneStarter --no-broker), the cluster metadata
#   (PulsarClusterMetadataSetup), then N PulsarBrokerStarter JVMs (-Xmx512m), each with its own ports, data
#   and log, and -- where the kernel's cgroups are writable -- its own cgroup with a CPU quota, so each broker
#   reports its own CPU usage and limit (LinuxInfoUtils reads the JVM's container metrics) as one broker per
#   container would. Every PID goes to RUN_DIR/pids/<name>.pid; scripts/pulsar/stop-cluster.sh stops them.
#
# usage: scripts/pulsar/start-cluster.sh [--run-dir DIR] [--brokers N] [--load-manager modular|extensible]
#            [--cpu-quota CORES] [--cluster NAME] [--port-offset K] [--conf-overlay FILE] [--deferred K]
#        scripts/pulsar/start-cluster.sh --run-dir DIR --only-broker N     (start broker-N of a running cluster)
# Prints the admin URLs, the metadata store and the broker.conf the brokers ran.
# --conf-overlay FILE: broker.conf lines (key=value) that replace the same keys of the generated broker.conf or are
# appended to it (one file per configuration: scripts/pulsar/whatif/*.conf). --deferred K: the last K of the
# --brokers are configured but not started (a broker that joins later: --only-broker N).
# Environment: LB_AUTO_UNLOAD_SPLIT (loadBalancerAutoUnloadSplitBundlesEnabled, default false),
# LB_THRESHOLD_PERCENT (loadBalancerBrokerThresholdShedderPercentage, default 1) and
# LB_HISTORY_PERCENTAGE (loadBalancerHistoryResourcePercentage, default 0.5: the smoothed usage follows a
# change within minutes, so an 8-minute test sees unloads); for the extensible manager LB_TARGET_STD
# (loadBalancerBrokerLoadTargetStd, default 0.001), LB_HIT_COUNT (loadBalancerSheddingConditionHitCountThreshold,
# default 1) and LB_SHEDDING_DELAY_SECONDS (loadBalanceSheddingDelayInSeconds, default 60); PULSAR_VERSION, the
# release the brokers run (default 4.0.7; jars.sh resolves each release's jars once, e.g. PULSAR_VERSION=3.0.7).
# Every broker.conf key written here is a ServiceConfiguration field of 3.0.7 and 4.0.7
# (conf/pulsar/service-configuration/<line>.txt); an overlay for another line must name that line's keys only.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUN_DIR="$ROOT/build/pulsar/run"
BROKERS=3
LOAD_MANAGER=modular
CPU_QUOTA=0.5
CLUSTER=lbreplay-live
OFFSET=0
OVERLAY=""
DEFERRED=0
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --brokers) BROKERS="$2"; shift 2 ;;
    --load-manager) LOAD_MANAGER="$2"; shift 2 ;;
    --cpu-quota) CPU_QUOTA="$2"; shift 2 ;;
    --cluster) CLUSTER="$2"; shift 2 ;;
    --port-offset) OFFSET="$2"; shift 2 ;;
    --conf-overlay) OVERLAY="$2"; shift 2 ;;
    --deferred) DEFERRED="$2"; shift 2 ;;
    --only-broker) ONLY="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "start-cluster: unknown argument $1" >&2; exit 2 ;;
  esac
done
ZK_PORT=$((12181 + OFFSET)); BK_PORT=$((13181 + OFFSET))
RUN_DIR="$(mkdir -p "$RUN_DIR" && cd "$RUN_DIR" && pwd)"
[ -z "$OVERLAY" ] || [ -f "$OVERLAY" ] || { echo "start-cluster: --conf-overlay $OVERLAY: no such file" >&2; exit 2; }
if [ -n "$ONLY" ]; then
  [ -f "$RUN_DIR/conf/broker-$ONLY.conf" ] || { echo "start-cluster: $RUN_DIR/conf/broker-$ONLY.conf: no such broker" >&2; exit 2; }
  [ ! -f "$RUN_DIR/pids/broker-$ONLY.pid" ] || { echo "start-cluster: broker-$ONLY already started" >&2; exit 2; }
  OFFSET=$(cat "$RUN_DIR/port-offset.txt")
fi
if [ -z "$ONLY" ] && ls "$RUN_DIR"/pids/*.pid >/dev/null 2>&1; then
  echo "start-cluster: $RUN_DIR/pids holds PIDs of a running cluster; run stop-cluster.sh --run-dir $RUN_DIR first" >&2
  exit 1
fi
[ -n "$ONLY" ] || { rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR"/{pids,logs,conf,data}; }
T0=$(date +%s)
# on any failure: stop what was started (by PID), keep the logs
[ -n "$ONLY" ] || trap 'st=$?; [ $st -ne 0 ] && { echo "start-cluster: failed; stopping what started (logs in $RUN_DIR/logs)" >&2; "$HERE/stop-cluster.sh" --run-dir "$RUN_DIR" >&2; }; exit $st' EXIT

# the release: PULSAR_VERSION (jars.sh), kept in RUN_DIR/pulsar-version.txt so a joining broker runs the same jars
[ -z "$ONLY" ] || PULSAR_VERSION="$(cat "$RUN_DIR/pulsar-version.txt")"
export PULSAR_VERSION="${PULSAR_VERSION:-4.0.7}"
echo "$PULSAR_VERSION" > "$RUN_DIR/pulsar-version.txt"
JARS="$("$HERE/jars.sh" 2>"$RUN_DIR/logs/jars.err")" || { cat "$RUN_DIR/logs/jars.err" >&2; exit 1; }
JAVA_OPTS=(-XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -Djava.net.preferIPv4Stack=true
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/sun.net=ALL-UNNAMED
  --add-opens java.management/sun.management=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/jdk.internal.platform=ALL-UNNAMED
  -Dio.netty.tryReflectionSetAccessible=true
  -Dlog4j.configurationFile="$HERE/log4j2.xml" -Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector
  -cp "$JARS/*")

wait_http() {  # url seconds pid
  local i
  for ((i = 0; i < $2; i++)); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { echo "start-cluster: process $3 died (see $RUN_DIR/logs)" >&2; return 1; }
    sleep 1
  done
  echo "start-cluster: $1 not up after $2 s" >&2; return 1
}
wait_port() {  # port seconds pid
  local i
  for ((i = 0; i < $2; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { echo "start-cluster: process $3 died (see $RUN_DIR/logs)" >&2; return 1; }
    sleep 1
  done
  echo "start-cluster: port $1 not open after $2 s" >&2; return 1
}

# ---- per-broker CPU isolation -------------------------------------------------------------------------------
# cgroup v2 (cpu.max) or v1 (cpu.cfs_quota_us + cpuacct), when writable; otherwise taskset onto one core
# (then every broker reads the whole host's CPU from /proc/stat and reports the same usage: documented).
PERIOD=100000
QUOTA=$(awk -v c="$CPU_QUOTA" -v p=$PERIOD 'BEGIN { printf "%d", c * p }')
CG_MODE=none
if [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -w /sys/fs/cgroup ]; then
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && CG_MODE=v2
elif [ -w /sys/fs/cgroup/cpu ] && [ -w /sys/fs/cgroup/cpuacct ]; then
  CG_MODE=v1
fi
CG_TAG="lbreplay-$(basename "$RUN_DIR")-$$"
cgroup_create() {  # name -> prints the directories, one per line
  case "$CG_MODE" in
    v2) mkdir -p "/sys/fs/cgroup/$CG_TAG-$1" && echo "$QUOTA $PERIOD" > "/sys/fs/cgroup/$CG_TAG-$1/cpu.max"
        echo "/sys/fs/cgroup/$CG_TAG-$1" ;;
    v1) mkdir -p "/sys/fs/cgroup/cpu/$CG_TAG-$1" "/sys/fs/cgroup/cpuacct/$CG_TAG-$1"
        echo $PERIOD > "/sys/fs/cgroup/cpu/$CG_TAG-$1/cpu.cfs_period_us"
        echo "$QUOTA" > "/sys/fs/cgroup/cpu/$CG_TAG-$1/cpu.cfs_quota_us"
        echo "/sys/fs/cgroup/cpu/$CG_TAG-$1"; echo "/sys/fs/cgroup/cpuacct/$CG_TAG-$1" ;;
  esac
}
echo "cpu isolation: $CG_MODE (quota $CPU_QUOTA cores per broker)" > "$RUN_DIR/cpu-isolation.txt"

if [ -z "$ONLY" ]; then
# ---- ZooKeeper + bookie ---------------------------------------------------------------------------------------
cat > "$RUN_DIR/conf/standalone.conf" <<CONF
clusterName=$CLUSTER
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
journalDirectory=$RUN_DIR/data/bk-journal
ledgerDirectories=$RUN_DIR/data/bk-ledgers
dbStorage_writeCacheMaxSizeMb=32
dbStorage_readAheadCacheMaxSizeMb=16
dbStorage_rocksDB_blockCacheSize=16777216
journalSyncData=false
httpServerEnabled=false
CONF
PULSAR_STANDALONE_USE_ZOOKEEPER=1 setsid java -Xms128m -Xmx384m -XX:MaxDirectMemorySize=256m "${JAVA_OPTS[@]}" \
  -Dpulsar.log.file="$RUN_DIR/logs/zk-bookie.log" \
  org.apache.pulsar.PulsarStandaloneStarter --config "$RUN_DIR/conf/standalone.conf" --no-broker \
  --no-functions-worker --no-stream-storage --zookeeper-port "$ZK_PORT" --bookkeeper-port "$BK_PORT" \
  --zookeeper-dir "$RUN_DIR/data/zookeeper" --bookkeeper-dir "$RUN_DIR/data/bookkeeper" --num-bookies 1 \
  > "$RUN_DIR/logs/zk-bookie.out" 2>&1 &
echo $! > "$RUN_DIR/pids/zk-bookie.pid"
wait_port "$ZK_PORT" 120 "$(cat "$RUN_DIR/pids/zk-bookie.pid")"
wait_port "$BK_PORT" 120 "$(cat "$RUN_DIR/pids/zk-bookie.pid")"

java -Xmx256m "${JAVA_OPTS[@]}" -Dpulsar.log.file="$RUN_DIR/logs/metadata-setup.log" \
  org.apache.pulsar.PulsarClusterMetadataSetup --cluster "$CLUSTER" \
  --metadata-store "zk:127.0.0.1:$ZK_PORT" --configuration-metadata-store "zk:127.0.0.1:$ZK_PORT" \
  --existing-bk-metadata-service-uri "zk+null://127.0.0.1:$ZK_PORT/ledgers" \
  --web-service-url "http://127.0.0.1:$((18081 + OFFSET))" --broker-service-url "pulsar://127.0.0.1:$((16651 + OFFSET))" \
  > "$RUN_DIR/logs/metadata-setup.out" 2>&1

# ---- brokers ----------------------------------------------------------------------------------------------------
case "$LOAD_MANAGER" in
  modular) LB_CONF="loadManagerClassName=org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl
loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder" ;;
  extensible) LB_CONF="loadManagerClassName=org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl
loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder
loadBalancerTransferEnabled=true
# brokers on one machine differ by 0.00-0.02 in load (std): a low target std and one hit, so a test sees transfers
loadBalancerBrokerLoadTargetStd=${LB_TARGET_STD:-0.001}
loadBalancerSheddingConditionHitCountThreshold=${LB_HIT_COUNT:-1}
loadBalanceSheddingDelayInSeconds=${LB_SHEDDING_DELAY_SECONDS:-60}
# TransferShedder and the split strategy log why they (do not) unload or split, and each run's load stats
loadBalancerDebugModeEnabled=true" ;;
  *) echo "start-cluster: --load-manager modular|extensible" >&2; exit 2 ;;
esac
# The load-balancing keys every broker runs with (also what `lbreplay replay --broker-conf` reads).
cat > "$RUN_DIR/conf/broker.conf" <<CONF
# load balancing (scripts/pulsar/start-cluster.sh --load-manager $LOAD_MANAGER)
$LB_CONF
loadBalancerEnabled=true
loadBalancerSheddingEnabled=true
loadBalancerSheddingIntervalMinutes=1
loadBalancerSheddingGracePeriodMinutes=1
loadBalancerReportUpdateMaxIntervalMinutes=1
loadBalancerResourceQuotaUpdateIntervalMinutes=1
# brokers on one machine differ by a few CPU points only (loopback traffic is not NIC bandwidth): a low threshold
loadBalancerBrokerThresholdShedderPercentage=${LB_THRESHOLD_PERCENT:-1}
# ThresholdShedder skips a broker whose planned offload is under this many MB/s (default 10): 0 for a small test
loadBalancerBundleUnloadMinThroughputThreshold=0
loadBalancerHistoryResourcePercentage=${LB_HISTORY_PERCENTAGE:-0.5}
loadBalancerCPUResourceWeight=1.0
loadBalancerMemoryResourceWeight=0.0
loadBalancerDirectMemoryResourceWeight=0.0
loadBalancerBandwithInResourceWeight=1.0
loadBalancerBandwithOutResourceWeight=1.0
loadBalancerOverrideBrokerNicSpeedGbps=0.01
loadBalancerAutoBundleSplitEnabled=true
# split children stay with their owner (default true: unloaded, so their clients' lookups make the leader preallocate
# them; when those lookups run against the leader's queued updateAll runs, which clear preallocations, no recording
# shows: an audit replays them right after the split check; data/samples/real-modular-split-children)
loadBalancerAutoUnloadSplitBundlesEnabled=${LB_AUTO_UNLOAD_SPLIT:-false}
loadBalancerNamespaceBundleMaxMsgRate=200
loadBalancerNamespaceBundleMaxTopics=1000
loadBalancerNamespaceBundleMaxSessions=1000
loadBalancerNamespaceBundleMaxBandwidthMbytes=100
loadBalancerNamespaceMaximumBundles=128
defaultNumberOfNamespaceBundles=4
CONF
# the configuration's own keys: each overlay line replaces the same key's line, the others are appended
if [ -n "$OVERLAY" ]; then
  awk -v src="$(basename "$OVERLAY")" '
    function key(line) { sub(/=.*/, "", line); gsub(/[[:space:]]/, "", line); return line }
    NR == FNR { if ($0 !~ /^[[:space:]]*(#|$)/) { k = key($0); v[k] = $0; order[++n] = k }; next }
    $0 !~ /^[[:space:]]*#/ && (key($0) in v) { print "# " src ":"; print v[key($0)]; done[key($0)] = 1; next }
    { print }
    END { for (i = 1; i <= n; i++) if (!(order[i] in done)) { if (!h++) print "# " src; print v[order[i]] } }
  ' "$OVERLAY" "$RUN_DIR/conf/broker.conf" > "$RUN_DIR/conf/broker.conf.tmp"
  mv "$RUN_DIR/conf/broker.conf.tmp" "$RUN_DIR/conf/broker.conf"
fi
echo "$OFFSET" > "$RUN_DIR/port-offset.txt"
echo "zk:127.0.0.1:$ZK_PORT" > "$RUN_DIR/metadata-store.txt"
echo "$CLUSTER" > "$RUN_DIR/cluster.txt"
for i in $(seq 1 "$BROKERS"); do
  WEB=$((18080 + OFFSET + i)); SVC=$((16650 + OFFSET + i)); B="broker-$i"
  { cat "$RUN_DIR/conf/broker.conf"; cat <<CONF

# this broker ($B)
clusterName=$CLUSTER
metadataStoreUrl=zk:127.0.0.1:$ZK_PORT
configurationMetadataStoreUrl=zk:127.0.0.1:$ZK_PORT
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$SVC
webServicePort=$WEB
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
managedLedgerCacheSizeMB=32
functionsWorkerEnabled=false
webSocketServiceEnabled=false
transactionCoordinatorEnabled=false
brokerDeleteInactiveTopicsEnabled=false
allowAutoTopicCreation=true
numIOThreads=2
numHttpServerThreads=4
bookkeeperClientNumWorkerThreads=2
exposeTopicLevelMetricsInPrometheus=false
CONF
  } > "$RUN_DIR/conf/$B.conf"
done
fi
launch_broker() {  # i: start broker-i from its conf (own cgroup, or taskset), record its PID and admin URL
  local i=$1 B="broker-$1" CGS
  mkdir -p "$RUN_DIR/data/$B"
  CGS=$(cgroup_create "$B" || true)
  printf '%s\n' $CGS > "$RUN_DIR/pids/$B.cgroups"
  [ -s "$RUN_DIR/pids/$B.cgroups" ] || rm -f "$RUN_DIR/pids/$B.cgroups"
  (
    for cg in $CGS; do echo "$BASHPID" > "$cg/cgroup.procs"; done
    [ -z "$CGS" ] && command -v taskset >/dev/null && NCPU=$(nproc) && TS=(taskset -c $(( (i - 1) % NCPU ))) || TS=()
    exec setsid "${TS[@]}" java -Xms256m -Xmx512m -XX:MaxDirectMemorySize=256m "${JAVA_OPTS[@]}" \
      -Dpulsar.log.file="$RUN_DIR/logs/$B.log" \
      org.apache.pulsar.PulsarBrokerStarter --broker-conf "$RUN_DIR/conf/$B.conf"
  ) > "$RUN_DIR/logs/$B.out" 2>&1 &
  echo $! > "$RUN_DIR/pids/$B.pid"
  echo "http://127.0.0.1:$((18080 + OFFSET + i))" >> "$RUN_DIR/admin-urls.txt"
}
if [ -n "$ONLY" ]; then
  launch_broker "$ONLY"
  wait_http "http://127.0.0.1:$((18080 + OFFSET + ONLY))/admin/v2/brokers/ready" 240 "$(cat "$RUN_DIR/pids/broker-$ONLY.pid")"
  echo "broker-$ONLY up in $(( $(date +%s) - T0 )) s: http://127.0.0.1:$((18080 + OFFSET + ONLY))"
  exit 0
fi
STARTED=$((BROKERS - DEFERRED))
for i in $(seq 1 "$STARTED"); do launch_broker "$i"; done
for i in $(seq 1 "$STARTED"); do
  wait_http "http://127.0.0.1:$((18080 + OFFSET + i))/admin/v2/brokers/ready" 240 "$(cat "$RUN_DIR/pids/broker-$i.pid")"
done
echo "$(( $(date +%s) - T0 ))" > "$RUN_DIR/startup-seconds.txt"
echo "cluster $CLUSTER (Pulsar $PULSAR_VERSION) up in $(cat "$RUN_DIR/startup-seconds.txt") s ($(cat "$RUN_DIR/cpu-isolation.txt"))"
echo "admin:          $(paste -sd' ' "$RUN_DIR/admin-urls.txt")"
echo "metadata store: zk:127.0.0.1:$ZK_PORT"
echo "broker.conf:    $RUN_DIR/conf/broker.conf"
echo "pids:           $RUN_DIR/pids"
