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


@dataclass
class Calibration:
    cpu_base: np.ndarray  # (B,) % of one core
    cpu_per_msg: np.ndarray  # (B,) % per msg/s

    @classmethod
    def from_sums(cls, n: np.ndarray, sx: np.ndarray, sy: np.ndarray, sxx: np.ndarray, sxy: np.ndarray) -> "Calibration":
        """Least squares ``y = a + b x`` from per-broker sums; a degenerate fit falls back to the mean ratio."""
        n = n.astype(np.float64)
        den = n * sxx - sx * sx
        with np.errstate(divide="ignore", invalid="ignore"):
            b = np.where(np.abs(den) > 1e-9, (n * sxy - sx * sy) / den, np.where(sx > 0, sy / sx, 0.0))
            a = np.where(n > 0, (sy - b * sx) / np.maximum(n, 1.0), 0.0)
        b = np.where(np.isfinite(b), np.maximum(b, 0.0), 0.0)
        a = np.where(np.isfinite(a), np.maximum(a, 0.0), 0.0)
        return cls(cpu_base=a, cpu_per_msg=b)


def model_usage(
    calib: Calibration,
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
