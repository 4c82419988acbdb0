"""A GPU's compute stream under interference: a pass that runs while collectives are in flight on the same GPU
runs slower (simcore/cost/comm/interference.py gives by how much), and is rescheduled whenever one starts or ends.

The engine runs a pass through `ComputeStream.run` only when a collective is in flight on the GPU or may start
during the pass (a gradient bucket the pass makes ready, a ZeRO 3 gather issued by it); every other pass is a
plain timed wait, as before, so layouts that overlap nothing simulate exactly as they did. The buckets a pass
makes ready become ready as its work progresses (milestones), so a slowed pass releases them later.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from simcore.cost.comm.interference import CommLoad, slowdown
from simcore.engine.clock import Clock, Signal


class ComputeStream:
    """One simulated GPU: its collectives in flight (the SMs and HBM bandwidth they take) and the pass it runs.
    A pass is `seconds` of work at full speed, of which `share` (its compute kernels, not its folded
    tensor-parallel collectives) slows down, a fraction `gemm_fraction` of that in GEMMs and attention. Its
    milestones are calls made when the pass has done so much work (the gradient buckets it makes ready)."""

    __slots__ = ("clock", "num_sms", "hbm_bytes_per_s", "sms", "hbm", "in_flight", "total", "done", "stamp",
                 "factor", "share", "gemm_fraction", "generation", "signal", "milestones")

    def __init__(self, clock: Clock, num_sms: int, hbm_bytes_per_s: float) -> None:
        self.clock, self.num_sms, self.hbm_bytes_per_s = clock, num_sms, hbm_bytes_per_s
        self.sms = self.hbm = 0.0  # taken by the collectives in flight
        self.in_flight = 0
        self.total = self.done = 0.0  # the running pass's work, and how much of it is done (s at full speed)
        self.stamp = 0.0
        self.factor = 1.0
        self.share = self.gemm_fraction = 0.0
        self.generation = 0
        self.signal: Signal | None = None
        self.milestones: deque[tuple[float, Callable[[], None]]] = deque()

    def run(self, seconds: float, share: float, gemm_fraction: float,
            milestones: list[tuple[float, Callable[[], None]]] | None = None) -> Signal:
        """Run a pass; the signal fires when it ends. `milestones`: (work done, call), in order of work."""
        self.total, self.done, self.stamp = seconds, 0.0, self.clock.now
        self.share, self.gemm_fraction = share, gemm_fraction
        self.milestones = deque(milestones or ())
        signal = self.signal = Signal()
        self._schedule()
        return signal

    def comm_started(self, load: CommLoad) -> None:
        self.in_flight += 1
        self.sms += load.sms
        self.hbm += load.hbm_bytes_per_s
        self._changed()

    def comm_ended(self, load: CommLoad) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:  # no rounding left behind
            self.sms = self.hbm = 0.0
        else:
            self.sms -= load.sms
            self.hbm -= load.hbm_bytes_per_s
        self._changed()

    def _factor(self) -> float:
        if self.in_flight == 0:
            return 1.0
        extra = slowdown(self.sms, self.hbm, self.num_sms, self.hbm_bytes_per_s, self.gemm_fraction) - 1.0
        return 1.0 + self.share * extra

    def _changed(self) -> None:
        if self.signal is None:
            return
        now = self.clock.now
        self.done = min(self._target(), self.done + (now - self.stamp) / self.factor)
        self.stamp = now
        if self._factor() != self.factor:
            self._schedule()

    def _target(self) -> float:
        return self.milestones[0][0] if self.milestones else self.total

    def _schedule(self) -> None:
        self.factor = self._factor()
        self.generation += 1
        self.clock.call_in(max(0.0, self._target() - self.done) * self.factor, self._reach, self.generation)

    def _reach(self, generation: int) -> None:
        if generation != self.generation or self.signal is None:
            return
        self.done, self.stamp = self._target(), self.clock.now
        if self.milestones:
            _work, call = self.milestones.popleft()
            call()
            self._schedule()
            return
        signal, self.signal = self.signal, None
        signal.fire(self.clock)
