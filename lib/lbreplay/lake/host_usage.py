"""The generator's load model: broker resource usage from the bundles a broker owns, and the report write rule.

Units are Pulsar's (``LinuxBrokerHostUsageImpl`` + ``LoadManagerShared.getSystemResourceUsage``):

================  =====================================================  =========================================
resource          usage                                                  limit
================  =====================================================  =========================================
cpu               ``cpu_base_pct + cpu_pct_per_msg * (rateIn + rateOut)   ``100 * cores``
                  + cpu_pct_per_mib * (thrIn + thrOut) / MiB``,
                  times a per-(tick, broker) noise ``1 +- cpu_noise``
                  (percent of one core)
memory            JVM heap in MiB: ``heap * (heap_base_fraction +          ``heap_mib``
                  heap_gc_amplitude * gc_phase) + topics * heap_kib_per_
                  topic / 1024`` (a GC sawtooth), capped at 95 % of heap
directMemory      MiB: ``direct_base_mib + thrIn / MiB *                  ``direct_mib``
                  direct_buffer_seconds`` (ledger cache and in-flight
                  entries), capped at 95 % of the limit
bandwidthIn       NIC rx Kbit/s: ``thrIn * 8 / 1024``                     ``nic_gbps * 1024 * 1024`` (the
                                                                         ``loadBalancerOverrideBrokerNicSpeedGbps``
                                                                         formula)
bandwidthOut      NIC tx Kbit/s: ``(thrOut + write_quorum * thrIn) * 8 /  same
                  1024`` -- the broker also sends every entry to
                  ``write_quorum`` bookies
================  =====================================================  =========================================

``rate*`` are msg/s and ``thr*`` bytes/s summed over the bundles the broker owns (``LocalBrokerData.update``
sums ``lastStats``). Heterogeneous brokers scale ``cores``, ``nic_gbps``, ``heap_mib`` and ``direct_mib`` by
their capacity factor; the per-message cost is the same, so a 0.5x broker shows twice the CPU percentage for
the same traffic. A bundle's ``cacheSize`` is ``thrIn * cache_seconds`` bytes.

The formulas accept NumPy arrays, plain floats or Spark ``Column`` objects (only ``+ - * /`` are used), so the
generator's calibration (NumPy) and its tables (Spark) share one definition.

Report write rule (``ModularLoadManagerImpl#needBrokerDataUpdate`` / ``#percentChange``): a broker writes a new
``LocalBrokerData`` when more than ``loadBalancerReportUpdateMaxIntervalMinutes`` passed since its last write,
or when the largest of ``100 * |U(last) - U(now)|``, ``percentChange`` of ``msgRateIn + msgRateOut``, of
``msgThroughputIn + msgThroughputOut`` and of ``numBundles`` exceeds
``loadBalancerReportUpdateThresholdPercentage``. ``U`` is the 4-arg weighted max usage where PIP-358 applies
(4.x) and ``getMaxResourceUsage()`` otherwise (:func:`report_usage_column`). The leader sees the last written
report. Modelling choices of the generator: a broker also writes when its bundle set changed (so every bundle
has exactly one reporting owner per tick), and on its first tick after (re)starting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

MIB: float = 1024.0 * 1024.0


@dataclass(frozen=True)
class LoadModel:
    """Parameters of the load model (scenario key ``load_model``)."""

    cpu_base_pct: float = 40.0  # idle JVM, GC, metadata sessions: percent of one core
    cpu_pct_per_msg: float = 0.004  # percent of one core per msg/s in+out (one core ~ 25k msg/s)
    cpu_pct_per_mib: float = 0.5  # percent of one core per MiB/s in+out (one core ~ 200 MiB/s)
    cpu_noise: float = 0.03  # +- fraction, per (tick, broker)
    write_quorum: int = 2  # bookie copies sent per entry (NIC tx)
    heap_base_fraction: float = 0.30
    heap_gc_amplitude: float = 0.25
    gc_period_ticks: int = 7
    heap_kib_per_topic: float = 64.0
    direct_base_mib: float = 256.0
    direct_buffer_seconds: float = 2.0
    cache_seconds: float = 1.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, *, path: str = "load_model") -> "LoadModel":
        from lbreplay.errors import UsageError

        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in (values or {}).items():
            if key not in known:
                raise UsageError(f"{path}.{key}: unknown key")
            try:
                kwargs[key] = int(value) if known[key].type in ("int", int) else float(value)
            except (TypeError, ValueError):
                raise UsageError(f"{path}.{key}: expected a number, got {value!r}") from None
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    # --- cpu ---------------------------------------------------------------------------------------
    def cpu_traffic_pct(self, rate_total: Any, thr_total: Any) -> Any:
        """CPU (percent of one core) caused by traffic: msg/s in+out and bytes/s in+out."""
        return rate_total * self.cpu_pct_per_msg + thr_total * (self.cpu_pct_per_mib / MIB)

    def cpu_usage(self, rate_total: Any, thr_total: Any) -> Any:
        """``cpu.usage`` before noise: base plus traffic cost."""
        return self.cpu_traffic_pct(rate_total, thr_total) + self.cpu_base_pct

    # --- bandwidth ---------------------------------------------------------------------------------
    def bandwidth_in_usage(self, thr_in: Any) -> Any:
        """``bandwidthIn.usage`` in Kbit/s (rx bytes/s * 8 / 1024)."""
        return kbit_per_s(thr_in)

    def bandwidth_out_usage(self, thr_in: Any, thr_out: Any) -> Any:
        """``bandwidthOut.usage`` in Kbit/s: dispatch to consumers plus ``write_quorum`` copies to bookies."""
        return kbit_per_s(thr_out + thr_in * self.write_quorum)

    # --- memory ------------------------------------------------------------------------------------
    def heap_usage(self, heap_mib: Any, gc_phase: Any, num_topics: Any) -> Any:
        """``memory.usage`` MiB before the 95 % cap; ``gc_phase`` in [0, 1) is the sawtooth position."""
        return heap_mib * self.heap_base_fraction + heap_mib * self.heap_gc_amplitude * gc_phase + num_topics * (
            self.heap_kib_per_topic / 1024.0
        )

    def direct_usage(self, thr_in: Any) -> Any:
        """``directMemory.usage`` MiB before the 95 % cap."""
        return thr_in * (self.direct_buffer_seconds / MIB) + self.direct_base_mib

    def cache_size(self, thr_in: Any) -> Any:
        """``NamespaceBundleStats.cacheSize`` bytes."""
        return thr_in * self.cache_seconds


@dataclass(frozen=True)
class BrokerCapacity:
    """A standard broker (scenario key ``broker``); heterogeneous brokers multiply it by a capacity factor."""

    cores: float = 8.0
    nic_gbps: float = 4.0
    heap_mib: float = 4096.0
    direct_mib: float = 8192.0

    def scaled(self, factor: float) -> "BrokerCapacity":
        return BrokerCapacity(self.cores * factor, self.nic_gbps * factor, self.heap_mib * factor, self.direct_mib * factor)

    @property
    def cpu_limit(self) -> float:
        return cpu_limit(self.cores)

    @property
    def nic_limit(self) -> float:
        return nic_limit_kbit(self.nic_gbps)


def kbit_per_s(bytes_per_s: Any) -> Any:
    """Bytes/s to Kbit/s as Pulsar's host-usage collector reports NIC rates (``bytes * 8 / 1024``)."""
    return bytes_per_s * 8.0 / 1024.0


def nic_limit_kbit(gbps: Any) -> Any:
    """NIC limit Kbit/s for ``loadBalancerOverrideBrokerNicSpeedGbps``-style speeds (``gbps * 1024 * 1024``)."""
    return gbps * 1024.0 * 1024.0


def cpu_limit(cores: Any) -> Any:
    """``cpu.limit`` = 100 * available processors."""
    return cores * 100.0


# --- Spark side ---------------------------------------------------------------------------------------
def report_usage_column(prefix: str = "", *, weights: tuple[float, float, float, float, float], weighted: bool,
                        include_memory: bool) -> Any:
    """``U`` of the report write rule as a Spark column, from ``<res>_usage`` / ``<res>_limit`` columns.

    ``percentUsage`` is float32 (``ResourceUsage.percentUsage``). ``weighted``: the 4-arg (or, with
    ``include_memory``, 5-arg) ``getMaxResourceUsageWithWeight`` in double; else ``getMaxResourceUsage()``
    (float32 max / 100, memory included up to 2.11).
    """
    from pyspark.sql import functions as F

    names = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")

    def pct(res: str) -> Any:
        usage = F.col(f"{prefix}{res}_usage").cast("float")
        limit = F.col(f"{prefix}{res}_limit").cast("float")
        return F.when(limit > 0, (usage / limit).cast("float") * F.lit(100.0).cast("float")).otherwise(
            F.lit(0.0)).cast("float")

    used = [n for n in names if n != "memory" or include_memory]
    if weighted:
        w = dict(zip(names, weights))
        return F.greatest(*[pct(n).cast("double") * F.lit(float(w[n])) for n in used]) / 100.0
    return (F.greatest(*[pct(n) for n in used]) / F.lit(100.0).cast("float")).cast("float").cast("double")


def report_write_ticks(df: Any, *, tick_seconds: int, threshold_pct: float, max_interval_minutes: float) -> Any:
    """The ticks at which each broker writes its report, by a sequential fold per broker over its ticks.

    ``df``: one row per alive (``broker``, ``tick``) with ``rate_total`` (msg/s in+out), ``thr_total``
    (bytes/s in+out), ``num_bundles``, ``usage`` (U, a fraction), ``forced`` (bool) and optionally ``origin``
    (int). Returns (``broker``, ``tick``) rows of the writes. ``ModularLoadManagerImpl#needBrokerDataUpdate``:
    write when ``now - lastUpdate > maxInterval`` or ``maxChange > threshold``; ``percentChange(old, new)`` is 0
    when both are 0, +inf when only ``old`` is 0. A broker's first tick and its first tick after a gap (restart)
    write; a first write is recorded at ``origin`` instead of ``tick`` when given (a broker that was already
    running before the history starts wrote its current report at some earlier tick).
    """
    from pyspark.sql import functions as F

    max_ms = int(round(max_interval_minutes * 60_000))
    step_ms = int(tick_seconds) * 1000
    rows = F.array_sort(
        F.collect_list(
            F.struct(
                F.col("tick").cast("int").alias("tick"),
                F.col("rate_total").cast("double").alias("rate"),
                F.col("thr_total").cast("double").alias("thr"),
                F.col("num_bundles").cast("double").alias("nb"),
                F.col("usage").cast("double").alias("u"),
                F.col("forced").cast("boolean").alias("forced"),
                (F.col("origin") if "origin" in df.columns else F.col("tick")).cast("int").alias("origin"),
            )
        )
    )

    def pct_change(old: Any, new: Any) -> Any:
        return F.when(old == 0, F.when(new == 0, F.lit(0.0)).otherwise(F.lit(float("inf")))).otherwise(
            F.abs((old - new) / old) * 100.0
        )

    init = F.struct(
        F.lit(False).alias("started"),
        F.lit(0).cast("int").alias("last_tick"),
        F.lit(-2).cast("int").alias("prev_tick"),
        F.lit(0.0).alias("rate"),
        F.lit(0.0).alias("thr"),
        F.lit(0.0).alias("nb"),
        F.lit(0.0).alias("u"),
        F.array().cast("array<int>").alias("writes"),
    )

    def merge(acc: Any, x: Any) -> Any:
        change = F.greatest(
            F.abs(acc["u"] - x["u"]) * 100.0,
            pct_change(acc["rate"], x["rate"]),
            pct_change(acc["thr"], x["thr"]),
            pct_change(acc["nb"], x["nb"]),
        )
        first = ~acc["started"] | (x["tick"] - acc["prev_tick"] > 1)
        at = F.when(~acc["started"], x["origin"]).otherwise(x["tick"])
        write = (
            x["forced"]
            | first
            | ((x["tick"] - acc["last_tick"]).cast("long") * step_ms > max_ms)
            | (change > float(threshold_pct))
        )
        return F.struct(
            F.lit(True).alias("started"),
            F.when(write, at).otherwise(acc["last_tick"]).alias("last_tick"),
            x["tick"].alias("prev_tick"),
            F.when(write, x["rate"]).otherwise(acc["rate"]).alias("rate"),
            F.when(write, x["thr"]).otherwise(acc["thr"]).alias("thr"),
            F.when(write, x["nb"]).otherwise(acc["nb"]).alias("nb"),
            F.when(write, x["u"]).otherwise(acc["u"]).alias("u"),
            F.when(write, F.concat(acc["writes"], F.array(at))).otherwise(acc["writes"]).alias("writes"),
        )

    folded = df.groupBy("broker").agg(F.aggregate(rows, init, merge)["writes"].alias("writes"))
    return folded.select("broker", F.explode("writes").alias("tick"))
