"""Extra Delta tables for what real Pulsar dumps carry beyond ``broker_load`` / ``bundle_load``, and the
``validation_runs`` bookkeeping table. Same style as :mod:`lbreplay.lake.tables` (Table/Column, registered in
the ``lbreplay`` database, input tables partitioned by ``cluster`` and ``date``).

- ``bundle_data`` — the leader's per-bundle history, ``/loadbalance/bundle-data/<tenant>/<ns>/<range>``
  (``BundleData``: short-term and long-term ``TimeAverageMessageData``).
- ``broker_time_average`` — ``/loadbalance/broker-time-average/<broker>`` (``TimeAverageBrokerData``).
- ``broker_load_data_ext`` — the extensible load manager's ``BrokerLoadData``
  (``org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLoadData``).
- ``top_bundles_load_data`` — the extensible load manager's ``TopBundlesLoadData`` (one row per listed bundle).
- ``top_bundles_publication`` — each ``TopBundlesLoadData`` message: its list's length, or a tombstone.
- ``leader_election`` — each election of the load manager's leader (``/loadbalance/leader``, or
  ``/loadbalance/extension/leader`` for the extensible one, recorded by ``collect``): it starts the leader's
  shedding timer (:mod:`lbreplay.kernel.leader_election`).
- ``shedding_run`` — each run of the leader's shedding task that the dump's leader log shows
  (``leader-decisions.log``): when it really ran, late behind its timer minute by its earlier runs' durations.
- ``leader_placement`` — each placement (``ModularLoadManagerImpl.selectBroker``) the brokers' logs show in the
  dump's ``leader-decisions.log``: a client's lookup, or a shedding run's own destination choice.
- ``validation_runs`` — one row per (cluster, table, Delta version) validation, read by replays to refuse
  unvalidated or failing input.
"""

from __future__ import annotations

from lbreplay.lake.dump_tree import (
    BROKER_LOAD_DATA,
    BUNDLE_DATA_KIND,
    LEADER_LOG_KIND,
    METADATA_VERSIONS_KIND,
    TIME_AVERAGE_BROKER_DATA,
    TOMBSTONE_KIND,
    TOP_BUNDLES_KIND,
    TOP_BUNDLES_TOMBSTONE_KIND,
)
from lbreplay.lake.tables import (
    BUNDLE_STATS_COLUMNS,
    DATE_COLUMN,
    DERIVED,
    INPUT,
    RESOURCE_UNITS,
    RESOURCES,
    Column,
    Table,
)


def _c(name: str, type_: str, comment: str, nullable: bool = True) -> Column:
    return Column(name, type_, comment, nullable)


def _tamd_cols(prefix: str, term: str, max_samples: int) -> tuple[Column, ...]:
    return (
        _c(f"{prefix}_max_samples", "INT", f"{term} TimeAverageMessageData.maxSamples (Pulsar uses {max_samples})"),
        _c(f"{prefix}_num_samples", "INT", f"{term} TimeAverageMessageData.numSamples (<= maxSamples)"),
        _c(f"{prefix}_msg_rate_in", "DOUBLE", f"{term} average msg/s in"),
        _c(f"{prefix}_msg_rate_out", "DOUBLE", f"{term} average msg/s out"),
        _c(f"{prefix}_msg_throughput_in", "DOUBLE", f"{term} average bytes/s in"),
        _c(f"{prefix}_msg_throughput_out", "DOUBLE", f"{term} average bytes/s out"),
    )


def _range_cols() -> tuple[Column, ...]:
    return (
        _c("namespace", "STRING", "tenant/ns (from the bundle name)"),
        _c("range_lower", "BIGINT", "bundle range lower bound (inclusive), 0..2^32-1; null if the name is malformed"),
        _c("range_upper", "BIGINT", "bundle range upper bound (exclusive; inclusive at 0xffffffff)"),
    )


_RES_COLS = tuple(
    col
    for r in RESOURCES
    for col in (
        _c(f"{r}_usage", "DOUBLE", f"{r} usage, {RESOURCE_UNITS[r]} (ResourceUsage.usage)"),
        _c(f"{r}_limit", "DOUBLE", f"{r} limit, {RESOURCE_UNITS[r]} (ResourceUsage.limit)"),
    )
)

_DATE = DATE_COLUMN

BUNDLE_DATA = Table(
    "bundle_data",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC), truncated to the minute", False),
        _c("bundle", "STRING", "full bundle name tenant/ns/0x%08x_0x%08x", False),
        *_range_cols(),
        _c("topics", "INT", "BundleData.topics"),
        *_tamd_cols("short", "short-term", 10),
        *_tamd_cols("long", "long-term", 1000),
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "bundle"),
    "Leader-side bundle history (BundleData: short/long-term TimeAverageMessageData) from /loadbalance/bundle-data dumps.",
    validated=True, replayed=True, dump_kinds=(BUNDLE_DATA_KIND,),
)

BROKER_TIME_AVERAGE = Table(
    "broker_time_average",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC), truncated to the minute", False),
        _c("broker", "STRING", "broker id host:port", False),
        _c("short_msg_throughput_in", "DOUBLE", "shortTermMsgThroughputIn, bytes/s"),
        _c("short_msg_throughput_out", "DOUBLE", "shortTermMsgThroughputOut, bytes/s"),
        _c("short_msg_rate_in", "DOUBLE", "shortTermMsgRateIn, msg/s"),
        _c("short_msg_rate_out", "DOUBLE", "shortTermMsgRateOut, msg/s"),
        _c("long_msg_throughput_in", "DOUBLE", "longTermMsgThroughputIn, bytes/s"),
        _c("long_msg_throughput_out", "DOUBLE", "longTermMsgThroughputOut, bytes/s"),
        _c("long_msg_rate_in", "DOUBLE", "longTermMsgRateIn, msg/s"),
        _c("long_msg_rate_out", "DOUBLE", "longTermMsgRateOut, msg/s"),
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker"),
    "TimeAverageBrokerData snapshots from /loadbalance/broker-time-average dumps.",
    validated=True, dump_kinds=(TIME_AVERAGE_BROKER_DATA,),
)

BROKER_LOAD_DATA_EXT = Table(
    "broker_load_data_ext",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC): updatedAt truncated to the minute", False),
        _c("broker", "STRING", "broker id host:port", False),
        *_RES_COLS,
        _c("msg_rate_in", "DOUBLE", "msg/s in (broker total)"),
        _c("msg_rate_out", "DOUBLE", "msg/s out"),
        _c("msg_throughput_in", "DOUBLE", "bytes/s in"),
        _c("msg_throughput_out", "DOUBLE", "bytes/s out"),
        _c("bundle_count", "INT", "bundleCount"),
        _c("topics", "BIGINT", "topics (absent in older versions)"),
        _c("max_resource_usage", "DOUBLE", "maxResourceUsage as reported (fraction; derived, recompute before use)"),
        _c("weighted_max_ema", "DOUBLE", "weightedMaxEMA (fraction): EMA of the weighted max resource usage"),
        _c("msg_throughput_ema", "DOUBLE", "msgThroughputEMA, bytes/s (absent in older versions)"),
        _c("updated_at", "TIMESTAMP", "updatedAt (UTC); null on a tombstone row (the broker removed its entry; every "
           "load column null)"),
        _c("reported_at", "TIMESTAMP", "reportedAt (UTC); null when 0 / absent"),
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker"),
    "Extensible load manager BrokerLoadData (loadbalancer-broker-load-data topic) snapshots.",
    validated=True, replayed=True, dump_kinds=(BROKER_LOAD_DATA, TOMBSTONE_KIND),
)

TOP_BUNDLES_LOAD_DATA = Table(
    "top_bundles_load_data",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC), truncated to the minute", False),
        _c("broker", "STRING", "reporting broker id host:port", False),
        _c("position", "INT", "0-based position in the reported topBundlesLoadData list (list order kept)", False),
        _c("bundle", "STRING", "full bundle name tenant/ns/0x%08x_0x%08x (bundleName)", False),
        *_range_cols(),
        *BUNDLE_STATS_COLUMNS,
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker", "bundle"),
    "Extensible load manager TopBundlesLoadData (loadbalancer-top-bundles-load-data topic): each broker's top-K bundles.",
    validated=True, replayed=True, dump_kinds=(TOP_BUNDLES_KIND,),
)

TOP_BUNDLES_PUBLICATION = Table(
    "top_bundles_publication",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "when the broker published it (UTC, ms): the message's publish time", False),
        _c("broker", "STRING", "publishing broker id host:port", False),
        _c("listed", "INT", "how many bundles its list holds (0: an empty list); null: a tombstone, the broker removed "
           "its entry (TopBundleLoadDataReporter.tombstone, when a bundle leaves or reaches it)"),
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker"),
    "Each TopBundlesLoadData message (loadbalancer-top-bundles-load-data), its list's length or its removal: "
    "from then until the broker's next list, the leader's TransferShedder reads none of its bundles.",
    validated=True, replayed=True, dump_kinds=(TOP_BUNDLES_KIND, TOP_BUNDLES_TOMBSTONE_KIND),
)

LEADER_ELECTION = Table(
    "leader_election",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "when the leader's timed tasks started (UTC, ms): the /loadbalance/leader znode's ctime; "
           "extensible: /loadbalance/extension/leader's, or the first UnloadScheduler run the dump's leader log "
           "shows, less whole minutes back to the election", False),
        _c("broker", "STRING", "the leader's broker id host:port (LeaderBroker.brokerId)", False),
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts"),
    "Elections of the load manager's leader (LeaderElectionService, /loadbalance/leader or /loadbalance/extension/"
    "leader), from collect's record.",
    validated=True, replayed=True, dump_kinds=(METADATA_VERSIONS_KIND,),
)

SHEDDING_RUN = Table(
    "shedding_run",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "when a run of the leader's LoadSheddingTask (extensible: UnloadScheduler) started (UTC, "
           "ms): the first line it logged in the dump's leader-decisions.log", False),
        _DATE,
        _c("read_at", "TIMESTAMP", "the latest time whose held reports are those its strategy printed (ThresholdShedder "
           "DEBUG), when before its lines: a report written just before the run that updateAll had not applied yet; "
           "null otherwise"),
    ),
    ("cluster", "date"),
    ("cluster", "ts"),
    "Runs of the leader's shedding task, from its log in the dump: an audit holds the reports it read then.",
    validated=True, replayed=True, dump_kinds=(LEADER_LOG_KIND,),
)

BROKER_DEPARTURE = Table(
    "broker_departure",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "when the broker's /loadbalance/brokers/<broker> znode was deleted (UTC, ms): collect "
           "saw the deletion (its 'absent' record); the leader drops the broker then (cleanupDeadBrokersData)", False),
        _c("broker", "STRING", "the broker id host:port that left", False),
        _DATE,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker"),
    "Brokers leaving the cluster (their ephemeral broker znode deleted: stopped, killed, session lost), from "
    "collect's record; a broker that comes back writes a new node and starts afresh.",
    validated=True, replayed=True, dump_kinds=(METADATA_VERSIONS_KIND,),
)

LEADER_PLACEMENT = Table(
    "leader_placement",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "when the broker logged 'N brokers being considered for assignment of <bundle>' (UTC, "
           "ms; ModularLoadManagerImpl.selectBroker, one call of the placement strategy)", False),
        _c("seq", "INT", "the line's place among the log's placement lines (0, 1, ...): the order of one millisecond's",
           False),
        _DATE,
        _c("broker", "STRING", "the broker that logged it (the line's host:port prefix); null when unprefixed"),
        _c("thread", "STRING", "the logging thread: pulsar-load-manager-* is doLoadShedding's own destination choice, "
           "any other a lookup (selectBrokerForAssignment of a bundle not preallocated)", False),
        _c("bundle", "STRING", "the bundle placed, tenant/ns/0xLLLLLLLL_0xUUUUUUUU", False),
        _c("candidates", "INT", "brokerCandidateCache.size() after the filters (the logged N)", False),
        _c("selected", "STRING", "the broker the strategy chose (DEBUG 'Selected broker Optional[<b>]' of the same "
           "thread); null when not logged or Optional.empty"),
        _c("lookup", "BOOLEAN", "a lookup (not on a pulsar-load-manager-* thread)", False),
    ),
    ("cluster", "date"),
    ("cluster", "ts", "seq"),
    "Placements the brokers logged (ModularLoadManagerImpl.selectBroker), from the dump's leader log: an audit "
    "replays the leader's lookups; none: the recording holds no placement lines.",
    validated=True, replayed=True, dump_kinds=(LEADER_LOG_KIND,),
)

VALIDATION_RUNS = Table(
    "validation_runs",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("table_name", "STRING", "validated table", False),
        _c("delta_version", "BIGINT", "Delta version of the table that was validated", False),
        _c("row_count", "BIGINT", "rows of the cluster in that version"),
        _c("fingerprint", "STRING", "content fingerprint of the cluster's rows (count:sum of xxhash64)"),
        _c("status", "STRING", "passed | failed", False),
        _c("failed_rules", "ARRAY<STRING>", "rules with failing rows (error severity)"),
        _c("warned_rules", "ARRAY<STRING>", "rules with flagged rows (warning severity)"),
        _c("failing_rows", "BIGINT", "rows quarantined for this cluster and table"),
        _c("validated_at", "TIMESTAMP", "when validation ran (UTC)", False),
    ),
    ("cluster",),
    ("cluster", "table_name", "delta_version", "validated_at"),
    "Validation status per (cluster, table, Delta version); replays refuse unvalidated or failing input.",
    role=DERIVED,
)

#: The tables this module declares, in the registry's order (:mod:`lbreplay.lake.registry`).
TABLES: tuple[Table, ...] = (BUNDLE_DATA, BROKER_TIME_AVERAGE, BROKER_LOAD_DATA_EXT, TOP_BUNDLES_LOAD_DATA,
                             TOP_BUNDLES_PUBLICATION, LEADER_ELECTION, SHEDDING_RUN, BROKER_DEPARTURE, LEADER_PLACEMENT,
                             VALIDATION_RUNS)
DUMP_TABLES: dict[str, Table] = {t.name: t for t in TABLES if t.role == INPUT}
"""Input tables written by ``lbreplay ingest`` in addition to ``broker_load`` and ``bundle_load``."""
