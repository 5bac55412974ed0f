"""Online loss-spike detection: feed each step's loss, learn when a step is a spike.

A step is a spike when its loss is both
- statistically unusual against the recent window: above mean + k standard deviations (the
  detector practitioners use, e.g. in OPT's and BLOOM's logbooks), or, with `method="mad"`,
  above median + k * 1.4826 * MAD, which one earlier spike in the window cannot inflate; and
- large: at least `min_ratio` times the recent level (the window's median). Practitioners call a
  spike a loss several times its recent level (about 3x), not batch-to-batch jitter; a batch that
  is a little high because it holds one bad sample is an outlier sample, not a spike.

A non-finite loss (NaN/inf) is always a spike. Spike steps are kept out of the window, so one
spike does not hide the next. The same class runs offline over a step log (`detect_spikes`).
Each spike carries the top of the pre-spike band (the `band_quantile` quantile of the window, as
the playbook judges recovery): the diagnosis blames a spike's samples until the rest of its batch
is back in that band.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dataclean.errors import ConfigError

# `dataclean feedback`'s detector settings, which the live guard uses too (`default_monitor`), so
# the guard and the analysis after the run call the same steps spikes. The ratio is lower than
# `SpikeMonitor`'s own default (3x): every spike is diagnosed and only a `data` spike convicts
# samples, and a byte- or small-vocabulary model cannot put a sample much above log(vocabulary)
# nats, so three times the level is out of reach of a few bad samples.
SPIKE_WINDOW = 100
SPIKE_K = 4.0
SPIKE_RATIO = 1.5
SPIKE_METHOD: Literal["std", "mad"] = "std"
BAND_QUANTILE = 0.9  # the playbook's default band


@dataclass
class SpikeEvent:
    """One detected spike: the step, its loss, the recent level and threshold, what was known."""

    step: int
    loss: float
    level: float
    threshold: float
    sample_ids: list[str] = field(default_factory=list)
    band: float = math.nan
    lr: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None


@dataclass
class SpikeMonitor:
    """Rolling-window spike detector for a training loop (cheap: O(window) per step).

    `window`: how many recent non-spike steps form the reference. `k`: how many standard
    deviations (or scaled MADs) above the centre a spike must be. `min_ratio`: how many times the
    recent level it must reach. `warmup`: steps seen before any judgement. `band_quantile`: the
    quantile of the window that tops the pre-spike band a spike's event carries.
    """

    window: int = 100
    k: float = 4.0
    min_ratio: float = 3.0
    method: Literal["std", "mad"] = "std"
    warmup: int = 20
    band_quantile: float = BAND_QUANTILE
    events: list[SpikeEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ConfigError(f"window: must be at least 2, got {self.window}")
        if self.k <= 0:
            raise ConfigError(f"k: must be positive, got {self.k}")
        if self.min_ratio < 1:
            raise ConfigError(f"min_ratio: must be at least 1, got {self.min_ratio}")
        if self.method not in ("std", "mad"):
            raise ConfigError(f"method: {self.method!r} is not one of std, mad")
        self._recent: deque[float] = deque(maxlen=self.window)

    def threshold(self) -> tuple[float, float] | None:
        """(level, threshold) from the current window; None while still warming up."""
        if len(self._recent) < max(2, min(self.warmup, self.window)):
            return None
        values = np.fromiter(self._recent, dtype="float64")
        level = float(np.median(values))
        if self.method == "std":
            spread_limit = float(values.mean() + self.k * values.std())
        else:
            mad = float(np.median(np.abs(values - level))) * 1.4826
            spread_limit = level + self.k * mad
        return level, max(spread_limit, self.min_ratio * level)

    def recent_losses(self) -> np.ndarray:
        """The recent non-spike losses the detector judges by (a copy)."""
        return np.fromiter(self._recent, dtype="float64")

    def reset_recent(self, losses: np.ndarray) -> None:
        """Judge by `losses` from now on (a rollback returns the detector to before the spike)."""
        self._recent = deque((float(v) for v in losses), maxlen=self.window)

    def update(
        self,
        step: int,
        loss: float,
        sample_ids: Sequence[str] = (),
        lr: float | None = None,
        grad_norm: float | None = None,
        loss_scale: float | None = None,
    ) -> SpikeEvent | None:
        """Judge one step; returns (and records in `events`) a SpikeEvent when it is a spike."""
        loss = float(loss)
        limits = self.threshold()
        finite = math.isfinite(loss)
        if finite and (limits is None or loss <= limits[1]):
            self._recent.append(loss)
            return None
        band = math.nan
        if limits is None:  # a non-finite loss during warmup
            limits = (math.nan, math.nan)
        else:
            band = float(np.quantile(np.fromiter(self._recent, dtype="float64"), self.band_quantile))
        event = SpikeEvent(
            step=int(step),
            loss=loss,
            level=limits[0],
            threshold=limits[1],
            band=band,
            sample_ids=[str(s) for s in sample_ids],
            lr=lr,
            grad_norm=grad_norm,
            loss_scale=loss_scale,
        )
        self.events.append(event)
        return event


def default_monitor() -> SpikeMonitor:
    """The spike detector with `dataclean feedback`'s default settings (the live guard's too)."""
    return SpikeMonitor(window=SPIKE_WINDOW, k=SPIKE_K, min_ratio=SPIKE_RATIO, method=SPIKE_METHOD)


def detect_spikes(
    steps: Sequence[int] | np.ndarray,
    losses: Sequence[float] | np.ndarray,
    monitor: SpikeMonitor | None = None,
) -> list[SpikeEvent]:
    """Run a (fresh) monitor over a whole loss series, in step order; returns its spikes."""
    monitor = monitor or SpikeMonitor()
    order = np.argsort(np.asarray(steps), kind="stable")
    for index in order:
        monitor.update(int(steps[index]), float(losses[index]))
    return monitor.events
