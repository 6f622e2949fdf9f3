"""The replay's broker load model, calibrated per broker on the history.

* bandwidth in/out (Kbit/s) = msgThroughputIn/Out (bytes/s) * 8 / 1024, limit = the broker's observed NIC limit
  (``LinuxBrokerHostUsageImpl``: NIC rx/tx rate in Kbit/s);
* cpu (% of one core) = ``cpu_base + cpu_per_msg * msg_rate`` fitted by least squares per broker over the ticks
  it was alive (so heterogeneous brokers stay heterogeneous), limit as observed;
* memory and direct memory (MiB): held as observed at the tick (last observed value while not reported).

The fit itself is an aggregation (sums per broker) done by Spark; this module holds the pure math.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KBIT_PER_BYTE = 8.0 / 1024.0
MIN_RELATIVE_SPREAD = 0.05  # a per-broker fit needs msg rates varying by >= 5 % (coefficient of variation)


@dataclass
class CpuCalibration:
    cpu_base: np.ndarray  # (B,) % of one core
    cpu_per_msg: np.ndarray  # (B,) % per msg/s

    @classmethod
    def from_sums(cls, n: np.ndarray, sx: np.ndarray, sy: np.ndarray, sxx: np.ndarray, sxy: np.ndarray,
                  min_spread: float = MIN_RELATIVE_SPREAD) -> "CpuCalibration":
        """Least squares ``y = a + b x`` per broker from per-broker sums.

        A broker's own fit is used where it is well determined: at least 3 samples, msg rates spread by at least
        ``min_spread`` (coefficient of variation) and a non-negative base and slope. Elsewhere (a broker seen
        briefly or at a nearly constant rate, whose slope would extrapolate wildly) the fleet's base (median of the
        well-determined fits) is kept and the slope is set so the model passes through the broker's own mean
        point, which keeps a slower broker's higher cost per message.
        """
        n = n.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            a, b = _fit(n, sx, sy, sxx, sxy)
            mean_x = np.where(n > 0, sx / np.maximum(n, 1.0), 0.0)
            mean_y = np.where(n > 0, sy / np.maximum(n, 1.0), 0.0)
            var_x = np.maximum(np.where(n > 0, sxx / np.maximum(n, 1.0) - mean_x**2, 0.0), 0.0)
            cv = np.where(mean_x > 0, np.sqrt(var_x) / mean_x, 0.0)
            ok = (n >= 3) & (cv >= min_spread) & np.isfinite(a) & np.isfinite(b) & (a >= 0) & (b >= 0)
            if ok.any():
                a_pool = float(np.median(a[ok]))  # the fleet's base: median of the well-determined fits
            else:
                pa, _ = _fit(n.sum(keepdims=True), sx.sum(keepdims=True), sy.sum(keepdims=True),
                             sxx.sum(keepdims=True), sxy.sum(keepdims=True))
                a_pool = float(max(pa[0], 0.0)) if np.isfinite(pa[0]) else 0.0
            base = np.minimum(a_pool, mean_y)
            slope = np.where(mean_x > 0, (mean_y - base) / mean_x, 0.0)
        a = np.where(ok, a, base)
        b = np.where(ok, b, np.maximum(slope, 0.0))
        return cls(cpu_base=np.nan_to_num(a), cpu_per_msg=np.nan_to_num(b))


def _fit(n: np.ndarray, sx: np.ndarray, sy: np.ndarray, sxx: np.ndarray, sxy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    den = n * sxx - sx * sx
    b = np.where(np.abs(den) > 1e-9, (n * sxy - sx * sy) / den, np.nan)
    a = (sy - b * sx) / np.maximum(n, 1.0)
    return a, b


def model_usage(
    calib: CpuCalibration,
    msg_rate: np.ndarray,
    throughput_in: np.ndarray,
    throughput_out: np.ndarray,
    observed_usage: np.ndarray,
) -> np.ndarray:
    """Modelled (B, 5) usage: cpu, memory, directMemory, bandwidthIn, bandwidthOut."""
    usage = observed_usage.copy()
    usage[:, 0] = calib.cpu_base + calib.cpu_per_msg * msg_rate
    usage[:, 3] = throughput_in * KBIT_PER_BYTE
    usage[:, 4] = throughput_out * KBIT_PER_BYTE
    return usage
