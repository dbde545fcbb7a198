"""The scale of the model's uncertainty, chosen online from the sensors' innovations.

The configured ``noise.dynamics``, ``noise.input_random_walk`` and ``model_error.random_walk``
say how far the equations of motion and the unknown efforts may drift per step; a rig owner
writes them once, and the defaults suit a simulated rig. On a real machine the encoders also
carry what no datasheet states (stamps taken at a varying time within the control period,
friction at reversals, a flexible link), and the same noises let the effort estimate follow
that error: on the DFKI double pendulum with its datasheet encoder noise, the causal effort's
normalised RMSE was 1.8-3.3 against 0.6-1.2 for a filtered inverse dynamics.

So the estimator chooses one factor ``scale`` on those three sigmas (the integration rows, the
sensor noises and the priors stay as configured) by the statistic ``mbfg tune`` maximises, the
likelihood of the innovations (each reading minus its prediction from the keyframe before),
made robust: per sensor the mean |whitened innovation| (``SensorStream.innovations``), summed
as sum_s log(mean_s) (the mean square picked 0.01 on one acrobot run whose best is 0.1). It
does so only when the innovations say the noises are wrong: if, at
:data:`SETTLE` s after the run started, some encoder's running innovation scale exceeds
``model_uncertainty.trigger`` sigmas (default 1.5; 0: always: on the simulated rigs of
tools/replay_fingerprint.py with their true noises the encoders sit at 1.00-1.12 there, on the
DFKI double pendulum's recordings at 1.7-5.9; gyros are not judged: a gyro-only crank's start
search keeps its gyro at 2.1-2.6 at 1 s on a simulated rig whose noises are right), or, if not
then, whenever it first does later ("quiet": a rig started at rest fits its noise until it moves;
the scale stays 1, the trigger is judged every :data:`QUIET_CHECK` s of stamps, and must hold for
:data:`QUIET_PERSIST` s; the readings of the last SETTLE s are kept, from which the search then
starts as it would from the run's start; a rig without encoders, whose trigger nothing can
exceed, holds scale 1 at SETTLE s instead), candidate
estimators with fixed scales (a geometric grid from
``model_uncertainty.max`` down to ``min``, ratio :data:`GRID_RATIO`) replay the readings so far
and then take every new one, alongside, until ``model_uncertainty.seconds`` s after the start;
the estimator uses the candidates' best scale so far, and after that holds it (the candidates
are dropped). The replay is spread so that no reading stalls a live node: each reading the
estimator takes, the candidates take at most :data:`CATCH_UP` readings per candidate in all of
the queue (the buffered first second, each new reading queued behind), one after the other in
the grid's order (from ``max``: by default 1, the scale in use until then), a candidate that
has caught up the new reading only. They have all caught up SETTLE / (CATCH_UP - 1) s of data
after SETTLE (1/3 s); until then the estimator uses the best of those that have (a replay at
once chose from all of them from 1 s on). The search ends at ``seconds`` or once the
candidates have all caught up, whichever is later: the scale held is chosen from the same
readings as a replay at once would, and held from the same time. The first :data:`SKIP` s of
every candidate are not scored (the start's transient). The scale is reported in
``Health.model_scale`` (the node's /diagnostics). The truth is never used. No ROS.

In the background (``background``, the live node): the candidates take no reading inside the
estimator's; they are built and work through the queue only in the time the node has spare
between its intake ticks (:meth:`ModelUncertainty.work`, checked before each reading of each
candidate), on the readings up to the first one at or after ``seconds`` (no later one is queued),
and at most ``background_share`` of a core on average (:class:`.WorkShare`); a costly piece
(building a candidate, a reading that closes one of its keyframes: :meth:`Estimator.may_close`)
starts only if its recent cost fits before the deadline (:class:`.PieceCost`). So the search
costs the node no latency and a bounded share of a core: the scale is chosen from the same
readings, and held, once they are all through (later than in a replay: on the panda at the
default share, about 3 minutes on a quiet machine; the estimator meanwhile uses the best of those that have
caught up).
"""
from __future__ import annotations

import math
import time

import numpy as np

from mbfg_ros.estimation.background_work import PieceCost, WorkShare
from mbfg_ros.model.config import ModelUncertaintyConfig

SETTLE = 1.0
"""s after the run's first reading at which the innovations are judged."""

SKIP = 0.25
"""s at each candidate's start whose innovations are not scored."""

FLOOR_MOST = 10.0
"""sigmas: the most a sensor's residual level may be taken as its floor by the divergence test
while the search runs (:meth:`.DivergenceMonitor.calibrate`)."""

GRID_RATIO = math.sqrt(10.0)
"""ratio between neighbouring candidate scales."""

QUIET_CHECK = 0.05
"""s of stamps between two judgements of the trigger while quiet (a run whose encoders fitted
their noise SETTLE s in: a rig started at rest)."""

QUIET_PERSIST = 0.5
"""s: while quiet, the search starts once the trigger has been exceeded at every judgement for
this long (a misfit that lasts: the model's error once the rig moves; the fast crank's encoder,
fitted at its noise on average, passes 1.5 sigma for at most 0.25 s at a time at its top speed)."""

CATCH_UP = 4
"""readings per candidate the candidates take at most in all per reading the estimator takes:
the search costs up to (1 + CATCH_UP x candidates) times the estimator's work per reading while
the candidates catch up, then (1 + candidates) times."""


BUILD_GUESS = 0.002
"""s: the cost of building a candidate estimator assumed before one was built (the panda's:
1.4-1.8 ms of CPU)."""

CLOSE_GUESS = 0.001
"""s: the cost of a candidate's reading that closes a keyframe assumed before one was timed."""

MEAN_FLOOR = 1e-12
"""A candidate's mean |whitened innovation| is scored (log) at least at this (:meth:`ModelUncertainty.best`)."""


def candidate_scales(cfg: ModelUncertaintyConfig) -> list[float]:
    """The grid of scales tried: max, max / GRID_RATIO, ... down to min (min included)."""
    out, s = [], cfg.max
    while s > cfg.min * (1 + 1e-9):
        out.append(s)
        s /= GRID_RATIO
    out.append(cfg.min)
    return out


class ModelUncertainty:
    """The model-uncertainty scale of one :class:`~.estimator.Estimator` (module docstring).

    ``make_candidate(scale)`` builds an estimator of the same rig whose scale is fixed."""

    def __init__(self, cfg: ModelUncertaintyConfig, make_candidate, encoders: bool = True) -> None:
        """``encoders``: whether the rig has an encoder (only encoders start a search)."""
        self.cfg = cfg
        self.make_candidate = make_candidate
        self.scale = 1.0
        self.state = "watching"            # watching -> searching -> held, or watching -> quiet -> ...
        self.buffer: list[tuple[str, float, np.ndarray]] = []   # readings some candidate has not taken
        self.candidates: list[tuple[float, object]] = []
        self.taken: list[int] = []         # per candidate: how many readings of the buffer it took
        self.t_first: float | None = None
        self.searched = False
        self.background = False            # the candidates work only in work() (module docstring)
        self._horizon = False              # background: the reading at ``seconds`` is queued, no more are
        self._next_check = math.inf        # quiet: the stamp at which the trigger is judged next
        self._above = 0                    # quiet: judgements in a row that found it above
        self._encoders = encoders
        self.clock = time.monotonic            # background: the wall clock the share and deadlines use (s)
        self.cpu_clock = time.thread_time      # background: the clock a piece's cost is taken on (s)
        self._share = WorkShare(cfg.background_share)    # background: work()'s share of a core
        self._build_cost = PieceCost(BUILD_GUESS)         # background: building a candidate
        self._close_cost = PieceCost(CLOSE_GUESS)         # background: a reading that closes a keyframe

    @classmethod
    def of(cls, est, model_scale: float | None, **start) -> "ModelUncertainty | None":
        """The online choice of an :class:`~.estimator.Estimator` ``est``, or None: a candidate
        (``model_scale`` fixed: it scores its innovations instead) or a config without it.
        ``start``: ``est``'s start arguments, which the candidates share."""
        if model_scale is not None:
            est.linearizer.innovations = np.zeros(est.fn.step.abs.size)
            return None
        if not est.cfg.model_uncertainty.adapt or est.layout.model_scale is None:
            return None

        def candidate(scale: float):
            return type(est)(est.mech, est.cfg, freeze_gc=False, step_function=est.fn.fresh(),
                             model_scale=scale, **start)
        return cls(est.cfg.model_uncertainty, candidate, any(r.kind == "encoder" for r in est.fn.residuals))

    def feed(self, est, sensor: str, stamp: float, value) -> None:
        """A reading ``est`` is about to take: on to the search; the scale it chose so far into
        ``est`` and its health (the divergence test judged against the levels seen meanwhile).
        Before a search has started the scale is 1, as ``est`` has it: nothing to apply (this
        runs per reading while the search is armed)."""
        self.add(sensor, stamp, value, est.measuring)
        if self.searched:
            self.apply(est)

    def apply(self, est) -> None:
        """The scale chosen so far into ``est`` and its health."""
        est.model_scale = est.health.model_scale = self.scale
        est.health.model_scale_searched = self.searched
        if self.searched:
            est.health.divergence.calibrate([s.name for s in est.measuring], FLOOR_MOST)

    def restart(self) -> None:
        """The estimator restarted (a reset, a time jump): a search not over yet starts over on
        the new run's readings (its candidates would otherwise bridge the gap); a held scale stays."""
        if self.state == "held":
            return
        self.state = "watching"
        self.buffer, self.candidates, self.taken = [], [], []
        self.t_first = None
        self._horizon = False
        self._above = 0

    @property
    def active(self) -> bool:
        """Whether it still takes readings."""
        return self.state != "held"

    def add(self, sensor: str, stamp: float, value, streams) -> None:
        """A reading the estimator is about to take (``streams``: its measuring streams, whose
        running innovation scales decide the search)."""
        if self.t_first is None:
            self.t_first = stamp
        if not self._horizon:
            self.buffer.append((sensor, stamp, np.array(value, float, copy=True)))
        if self.state == "quiet":
            if stamp < self._next_check:
                return
            self._next_check = stamp + QUIET_CHECK
            keep = stamp - SETTLE                 # the buffer: the last SETTLE s only
            buf = self.buffer
            if buf[0][1] < keep:
                i = 0
                while buf[i][1] < keep:
                    i += 1
                del buf[:i]
            self._above = self._above + 1 if self._triggered(streams) else 0
            if self._above * QUIET_CHECK < QUIET_PERSIST:
                return
            self.t_first = buf[0][1]              # the search starts from the buffered second
            self._start_search()
        elif self.state == "watching":
            if stamp - self.t_first >= SETTLE:
                if self._triggered(streams):
                    self._start_search()
                elif not self._encoders:          # nothing can start a search: scale 1 held
                    self.state = "held"
                    self.buffer.clear()
                else:                             # quiet: scale 1, the trigger judged on
                    self.state = "quiet"
                    self._next_check = stamp + QUIET_CHECK
            if self.state != "searching":
                return
        if self.background:
            self._horizon = self._horizon or stamp - self.t_first >= self.cfg.seconds
            return
        self._catch_up(CATCH_UP * len(self.candidates))
        self._settle(stamp - self.t_first >= self.cfg.seconds)

    def _triggered(self, streams) -> bool:
        """Whether some encoder's running innovation scale is above the trigger (or it is 0)."""
        worst = max((s.scale for s in streams if s.counts.used and s.kind == "encoder"), default=1.0)
        return worst > self.cfg.trigger or self.cfg.trigger == 0

    def _start_search(self) -> None:
        self.state = "searching"
        self.searched = True
        if not self.background:                   # in the background: built in work()
            self.candidates = [(c, self.make_candidate(c)) for c in candidate_scales(self.cfg)]
            self.taken = [0] * len(self.candidates)

    def work(self, deadline: float) -> None:
        """In the background: the candidates are built and take queued readings until
        ``deadline`` (``clock`` s), the search's share of a core
        (``background_share``: :class:`.WorkShare`) is used up, or they are through the queue.
        A costly piece (building a candidate, a reading that closes one of its keyframes) starts
        only if its recent cost fits before then (:class:`.PieceCost`)."""
        if self.state != "searching":
            return
        start = self.clock()
        stop = min(deadline, self._share.until(start))
        try:
            if self._build(stop):
                self._catch_up(math.inf, stop)
        finally:
            self._share.spent(self.clock() - start)
        if len(self.candidates) == len(candidate_scales(self.cfg)):
            self._settle(self._horizon)

    def _build(self, stop: float) -> bool:
        """Build the candidates not built yet, one at a time, until ``stop`` (monotonic s);
        whether they all are."""
        scales = candidate_scales(self.cfg)
        while len(self.candidates) < len(scales):
            t = self.clock()
            if not self._build_cost.fits(stop - t):
                return False
            c, cpu = scales[len(self.candidates)], self.cpu_clock()
            self.candidates.append((c, self.make_candidate(c)))
            self.taken.append(0)
            self._build_cost.took(self.cpu_clock() - cpu)
        return True

    def _settle(self, over: bool) -> None:
        """The best scale of the candidates that have caught up; once all have, the queue
        starts again, and the scale is held if the search is ``over``."""
        ready = [i for i, n in enumerate(self.taken) if n == len(self.buffer)]
        self.scale = self.best(ready)
        if len(ready) == len(self.candidates):
            self.buffer.clear()
            self.taken = [0] * len(self.candidates)
            if over:
                self.state = "held"
                self.candidates = []

    def _catch_up(self, budget: float, deadline: float = math.inf) -> None:
        """The candidates take the queue's readings they have not taken, in the grid's order,
        ``budget`` readings in all, until ``deadline`` (checked before each reading)."""
        timed = deadline != math.inf
        for i, (_, est) in enumerate(self.candidates):
            while self.taken[i] < len(self.buffer) and budget > 0:
                sensor, stamp, value = self.buffer[self.taken[i]]
                costly = False
                if timed:
                    t = self.clock()
                    if t >= deadline:
                        return
                    costly = est.may_close(sensor, stamp)     # only if its cost fits
                    if costly:
                        if not self._close_cost.fits(deadline - t):
                            return
                        cpu = self.cpu_clock()
                est.take_sample(sensor, stamp, value)
                if costly:
                    self._close_cost.took(self.cpu_clock() - cpu)
                self.taken[i] += 1
                budget -= 1

    def encoder_levels_known(self, stamp: float, window: float) -> bool:
        """Whether the encoders' residual levels are known at ``stamp`` (s) for the divergence
        test's verdict (:class:`.LossJudge`): not while watching (the first SETTLE s: the
        noises may be wrong), nor in a search's first ``window`` s (the divergence test's: the
        floors it calibrates are being found, and its window still holds readings judged
        without them)."""
        if self.state == "watching":
            return False
        return self.state == "held" or stamp >= self.t_first + SETTLE + window

    def best(self, ready: list[int]) -> float:
        """The scale of the candidates ``ready`` (indices: those that have caught up) whose
        innovations score best so far (the current one if none has scored readings of every
        sensor yet)."""
        best, best_cost = self.scale, math.inf
        log = math.log
        for i in ready:                           # (called per reading while searching: plain loops)
            c, est = self.candidates[i]
            means, used = [], 0
            for s in est.measuring:
                inn = s.innovations
                if inn.count:
                    means.append(inn.total / inn.count)        # (its mean)
                if s.counts.used:
                    used += 1
            if len(means) < used or not means:
                continue
            cost = sum([log(MEAN_FLOOR if MEAN_FLOOR > m else m) for m in means])   # (log of max(m, floor))
            if cost < best_cost:
                best, best_cost = c, cost
        return best


class InnovationSum:
    """Mean |whitened innovation| of one sensor's scored readings."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, total: float, count: int) -> None:
        """``count`` readings whose |whitened innovations| sum to ``total``."""
        self.total += total
        self.count += count

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan


def score_innovations(streams, layout, innovations: np.ndarray) -> None:
    """Add a step's |whitened innovations| (``innovations``: per reading slot of the step
    ``layout``, 0 in unused slots) to each stream's :class:`InnovationSum` (``taken``: the
    readings it took in the step)."""
    for b, s in zip(layout.blocks, streams):
        if s.taken:
            s.innovations.add(float(innovations[b.readings].sum()), s.taken)
