"""The replay's broker load model, calibrated per broker on the history.

* bandwidth in/out (Kbit/s) = msgThroughputIn/Out (bytes/s) * 8 / 1024, limit = the broker's observed NIC limit
  (``LinuxBrokerHostUsageImpl``: NIC rx/tx rate in Kbit/s);
* cpu (% of one core) = ``cpu_base + cpu_per_msg * msg_rate`` fitted by least squares per broker over the ticks
  it was alive (so heterogeneous brokers stay heterogeneous), limit as observed;
* memory and direct memory (MiB): held as observed at the tick (last observed value while not reported).

A recording's closed loop (:func:`recorded_usage`) starts from each broker's recorded usage and adds the modelled
change of the traffic the replay gives it against the traffic its report recorded: cpu by the fitted slope,
bandwidth by the broker's recorded bandwidth per byte (a broker measuring its NIC sees none of its loopback
traffic). Where the replay's ownership is the recorded one, the usage is the recorded usage.

The calibration's error is the fit's mean absolute percentage error over the broker reports whose cpu is at least
:data:`MIN_MEASURED_CPU` (a broker's first report, before its cpu counter's first interval, reads ~1e-7 %); a
closed loop refuses a calibration whose error reaches :data:`MAX_CALIBRATION_MAPE`.

The fit itself is an aggregation (sums per broker) done by Spark; this module holds the pure math.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KBIT_PER_BYTE = 8.0 / 1024.0
MIN_RELATIVE_SPREAD = 0.05  # a per-broker fit needs msg rates varying by >= 5 % (coefficient of variation)
# cpu readings (% of one core) below this are not measurements of load: LinuxBrokerHostUsageImpl's first sample
MIN_MEASURED_CPU = 0.1
# A closed loop refuses a calibration whose MAPE reaches 100 %: its cpu is no closer to the recorded one than
# zero is. (The committed 20-minute recordings of near-idle brokers fit at 50-61 %: their cpu is mostly JVM noise.)
MAX_CALIBRATION_MAPE = 1.0


@dataclass
class CpuCalibration:
    cpu_base: np.ndarray  # (B,) % of one core
    cpu_per_msg: np.ndarray  # (B,) % per msg/s
    # (B,) Kbit/s of bandwidth in / out per byte/s of throughput as recorded (None: KBIT_PER_BYTE)
    bandwidth_in_per_byte: np.ndarray | None = None
    bandwidth_out_per_byte: np.ndarray | None = None

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


def bandwidth_per_byte(bandwidth: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Per broker recorded bandwidth (Kbit/s summed over its reports) per byte/s of throughput (summed);
    ``KBIT_PER_BYTE`` for a broker that recorded no throughput."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(throughput > 0, bandwidth / throughput, KBIT_PER_BYTE)
    return np.nan_to_num(np.asarray(ratio, dtype=np.float64), nan=KBIT_PER_BYTE)


def modelled_cpu(calib: CpuCalibration, msg_rate: np.ndarray) -> np.ndarray:
    """The fitted cpu (% of one core) of each broker at ``msg_rate`` (msg/s in + out)."""
    return np.asarray(calib.cpu_base + calib.cpu_per_msg * msg_rate, dtype=np.float64)


def recorded_usage(calib: CpuCalibration, replay_traffic: np.ndarray, recorded_traffic: np.ndarray,
                   recorded: np.ndarray) -> np.ndarray:
    """A recording's closed loop: (B, 5) usage = each broker's recorded usage plus the modelled change of its
    traffic. ``replay_traffic`` / ``recorded_traffic`` are (B, 6) load vectors (throughput in/out, rate in/out,
    sessions, topics) of the bundles the replay gives each broker and of those its held report lists."""
    delta = replay_traffic - recorded_traffic
    kin = calib.bandwidth_in_per_byte if calib.bandwidth_in_per_byte is not None else KBIT_PER_BYTE
    kout = calib.bandwidth_out_per_byte if calib.bandwidth_out_per_byte is not None else KBIT_PER_BYTE
    usage = recorded.copy()
    usage[:, 0] += calib.cpu_per_msg * (delta[:, 2] + delta[:, 3])
    usage[:, 3] += kin * delta[:, 0]
    usage[:, 4] += kout * delta[:, 1]
    return np.maximum(usage, 0.0)


def model_usage(
    calib: CpuCalibration,
    msg_rate: np.ndarray,
    throughput_in: np.ndarray,
    throughput_out: np.ndarray,
    observed_usage: np.ndarray,
) -> np.ndarray:
    """Modelled (B, 5) usage: cpu, memory, directMemory, bandwidthIn, bandwidthOut."""
    usage = observed_usage.copy()
    usage[:, 0] = modelled_cpu(calib, msg_rate)
    usage[:, 3] = throughput_in * KBIT_PER_BYTE
    usage[:, 4] = throughput_out * KBIT_PER_BYTE
    return usage
