"""The sequential gate: interleaved base/head rounds, looked at after every few rounds,
stopping as soon as the decision is clear (pure functions; issue 24).

Model
-----
The unit of evidence is one **round pair**: round ``i`` of base and round ``i``
of head, which asv's ``--interleave-rounds`` runs back to back (base, head, then
head, base, ...), each in its own process. Its value is

    d_i = ln(median of head's samples in round i) - ln(median of base's in round i)

so a slow phase of the machine that lasts longer than one round hits both
members of the pair and cancels, and samples of one process (which share its
state and are not independent) count once, as their median. The gate tests the
mean of ``d`` (the log of the typical head/base ratio) with a one-sample t
statistic over the pairs seen so far.

Error rate under repeated looks
-------------------------------
Looking at the data after every ``step`` rounds and stopping at the first
significant look inflates the false-block rate of a fixed-level test (Armitage,
McPherson & Rowe, "Repeated significance tests on accumulating data", J. R.
Stat. Soc. A 132, 1969). The gate therefore spends its one-sided level
``alpha`` over the looks with a Lan-DeMets spending function (Lan & DeMets,
"Discrete sequential boundaries for clinical trials", Biometrika 70, 1983):

* ``pocock`` (default): ``alpha(t) = alpha * ln(1 + (e - 1) t)``, spends early,
  so clear slowdowns stop at the first looks (Pocock, Biometrika 64, 1977);
* ``obrien-fleming``: ``alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``,
  spends almost nothing early (O'Brien & Fleming, Biometrics 35, 1979).

``t`` is the information fraction, rounds so far / the cap. The boundaries
``b_k`` of the z statistic solve ``P(Z_1 < b_1, ..., Z_k < b_k) = 1 - alpha(t_k)``
for Brownian-motion increments (``corr(Z_i, Z_j) = sqrt(t_i / t_j)``), computed
with scipy's multivariate normal CDF (Genz's algorithm, fixed seed). The
variance is unknown and estimated at each look, so each look's boundary is used
as a *nominal significance level* ``p_k = 1 - Phi(b_k)`` against the t
distribution with the look's degrees of freedom (the "significance level
approach" for unknown variance, Jennison & Turnbull, *Group Sequential Methods
with Applications to Clinical Trials*, 2000, ch. 3; its error rate stays close to
``alpha``, which ``experiments/sequential-gate/simulate.py`` checks).

Decisions at a look
-------------------
With ``est`` the mean of ``d``, ``[lo, hi]`` its interval at the look's nominal
level (one-sided ``p_k`` on each side, a repeated confidence interval, Jennison &
Turnbull ch. 9) and ``thr = ln(1 + threshold)``:

========= ===================================================================
SLOWER    ``lo > 0`` (the one-sided test crosses the boundary) and
          ``est > thr``: block, stop. A block needs the boundary crossing, so
          the probability of blocking a head that is not slower is at most
          ``alpha`` over all looks; the practical threshold only removes blocks.
FASTER    ``hi < 0`` and ``est < -thr``: stop.
SAME      ``hi < thr`` (and not FASTER): any slowdown is below the threshold at
          the look's confidence, stop.
continue  otherwise, until the cap.
========= ===================================================================

At the cap, a series still open is UNCERTAIN when ``est`` is beyond the
threshold either way, else SAME ("within the threshold, not conclusive"); it
never blocks. Exit codes are unchanged (:func:`harness.gate.decide.exit_code`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from harness.core.model import GateStatus

SPENDING = ("pocock", "obrien-fleming")

#: What a look can conclude; ``None`` = keep measuring.
Decision = GateStatus | None


@dataclass(frozen=True)
class SequentialConfig:
    """The sequential rule.

    Attributes
    ----------
    alpha : float
        One-sided probability of blocking a head that is not slower, over all
        looks (default 0.01).
    step : int
        Rounds per side added between looks (the first look is after ``step``
        rounds too).
    max_rounds : int
        The cap: rounds per side after which an open series is decided as
        UNCERTAIN or SAME. A multiple of ``step`` (rounded up otherwise).
    spending : str
        ``"pocock"`` or ``"obrien-fleming"`` (Lan-DeMets spending functions).
    """

    alpha: float = 0.01
    step: int = 2
    max_rounds: int = 12
    spending: str = "pocock"

    def __post_init__(self) -> None:
        if not (0 < self.alpha < 0.5):
            raise ValueError(f"sequential alpha must be in (0, 0.5), got {self.alpha!r}")
        if not isinstance(self.step, int) or self.step < 1:
            raise ValueError(f"sequential step must be a positive integer (rounds per look), got {self.step!r}")
        if not isinstance(self.max_rounds, int) or self.max_rounds < 2 or self.max_rounds < self.step:
            raise ValueError(f"max_rounds must be an integer >= 2 and >= step ({self.step}), got {self.max_rounds!r}")
        if self.spending not in SPENDING:
            raise ValueError(f"spending must be one of {SPENDING}, got {self.spending!r}")

    @property
    def looks(self) -> int:
        """Number of looks up to the cap."""
        return math.ceil(self.max_rounds / self.step)

    def rounds_at(self, look: int) -> int:
        """Rounds per side at look ``look`` (1-based)."""
        return min(look * self.step, self.looks * self.step)


def spent(t: float, alpha: float, spending: str) -> float:
    """Cumulative one-sided level spent by information fraction ``t`` in (0, 1].

    Lan & DeMets (1983): Pocock-type ``alpha ln(1 + (e - 1) t)``,
    O'Brien-Fleming-type ``2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``.

    Raises
    ------
    ValueError
        For ``t`` outside (0, 1] or an unknown spending function.
    """
    from scipy.stats import norm

    if not (0 < t <= 1):
        raise ValueError(f"information fraction must be in (0, 1], got {t!r}")
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    if spending == "obrien-fleming":
        return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(t)))
    raise ValueError(f"spending must be one of {SPENDING}, got {spending!r}")


@lru_cache(maxsize=64)
def boundaries(alpha: float, looks: int, spending: str = "pocock", grid: int = 2001) -> tuple[float, ...]:
    """One-sided z boundaries ``b_1..b_K`` for ``looks`` equally spaced looks.

    Each ``b_k`` makes the probability of first crossing at look ``k`` under the
    null equal to ``spent(k / K) - spent((k - 1) / K)``. Computed by the
    recursive numerical integration of Armitage, McPherson & Rowe (1969) on the
    score scale ``S_k = Z_k sqrt(t_k)`` (Brownian motion, independent normal
    increments of variance ``1 / K``), as in Jennison & Turnbull (2000) ch. 19:
    the density of ``S_k`` on the paths that have not crossed is carried on a
    grid of ``grid`` points (trapezoid rule) and each boundary solved with
    Brent's method. Deterministic; accurate to about 1e-4 in ``b``
    (O'Brien-Fleming-type, K=5, alpha=0.025 gives 4.877, 3.357, 2.680, 2.290,
    2.031, as gsDesign's ``sfLDOF``). Own code because no maintained Python
    package of group-sequential boundaries is a dependency here.

    Raises
    ------
    ValueError
        For ``looks < 1`` or an invalid ``alpha``/``spending``.
    """
    from scipy.optimize import brentq
    from scipy.stats import norm

    if looks < 1:
        raise ValueError(f"need at least one look, got {looks}")
    dt = 1.0 / looks
    sd = math.sqrt(dt)
    out: list[float] = []
    s = w = dens = None  # grid of S_{k-1} below its boundary, trapezoid weights, density there
    prev_spent = 0.0
    for k in range(1, looks + 1):
        tk = k * dt
        cum = spent(tk, alpha, spending)
        inc = cum - prev_spent
        prev_spent = cum
        if k == 1:
            b = float(norm.isf(inc))
        else:

            def crossing(b, s=s, w=w, dens=dens, tk=tk, inc=inc):
                return float(np.sum(w * dens * norm.sf((b * math.sqrt(tk) - s) / sd))) - inc

            if inc <= 0 or crossing(12.0) > 0:
                b = math.inf
            else:
                b = float(brentq(crossing, -8.0, 12.0, xtol=1e-7))
        out.append(b)
        if k == looks:
            break
        # density of S_k on the paths still below every boundary so far
        top = b * math.sqrt(tk) if math.isfinite(b) else 10.0 * math.sqrt(tk)
        new_s = np.linspace(-10.0 * math.sqrt(tk), top, grid)
        h = new_s[1] - new_s[0]
        new_w = np.full(grid, h)
        new_w[0] = new_w[-1] = h / 2
        if k == 1:
            new_dens = norm.pdf(new_s / sd) / sd
        else:
            kern = norm.pdf((new_s[:, None] - s[None, :]) / sd) / sd
            new_dens = kern @ (w * dens)
        s, w, dens = new_s, new_w, new_dens
    return tuple(out)


def nominal_levels(cfg: SequentialConfig) -> tuple[float, ...]:
    """One-sided nominal significance level of each look, ``1 - Phi(b_k)``."""
    from scipy.stats import norm

    return tuple(float(norm.sf(b)) for b in boundaries(cfg.alpha, cfg.looks, cfg.spending))


def round_pairs(base_rounds: Sequence[Sequence[float]], head_rounds: Sequence[Sequence[float]]) -> np.ndarray:
    """``d_i = ln median(head round i) - ln median(base round i)`` for each round pair.

    Rounds are paired by position (asv's interleaved order); non-finite and
    non-positive samples are dropped and a round left empty on either side drops
    its pair. Shape ``(n_pairs,)``, float64.
    """
    out = []
    for b, h in zip(base_rounds, head_rounds):
        bb = np.asarray([x for x in b if np.isfinite(x) and x > 0], dtype=float)
        hh = np.asarray([x for x in h if np.isfinite(x) and x > 0], dtype=float)
        if bb.size and hh.size:
            out.append(math.log(float(np.median(hh))) - math.log(float(np.median(bb))))
    return np.asarray(out, dtype=float)


@dataclass(frozen=True)
class Look:
    """What one look saw and concluded.

    ``pairs`` round pairs; ``estimate`` the mean log ratio (``ratio = exp``);
    ``low``/``high`` the look's interval of the log ratio (``None`` with fewer
    than 2 pairs); ``p_value`` the one-sided t-test p of "head slower";
    ``level`` the look's nominal level; ``decision`` a status or ``None``
    (keep measuring).
    """

    look: int
    pairs: int
    estimate: float
    low: float | None
    high: float | None
    p_value: float | None
    level: float
    decision: Decision
    final: bool

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)

    def as_dict(self) -> dict:
        return {
            "look": self.look,
            "pairs": self.pairs,
            "ratio": self.ratio,
            "ratio_low": math.exp(self.low) if self.low is not None else None,
            "ratio_high": math.exp(self.high) if self.high is not None else None,
            "p_value": self.p_value,
            "level": self.level,
            "decision": self.decision.value if self.decision is not None else None,
        }


def look(d: Sequence[float], k: int, cfg: SequentialConfig, threshold: float) -> Look:
    """Decide at look ``k`` (1-based) from the round-pair log ratios ``d`` so far.

    Parameters
    ----------
    d : sequence of float
        :func:`round_pairs` of the rounds measured so far.
    k : int
        The look's number; ``k >= cfg.looks`` is the cap (an open series is
        decided there).
    threshold : float
        Practical threshold, relative (0.05 = 5%).

    With no finite pair the estimate is 0.0 (no change known), nothing is
    decided before the cap, and the cap decides UNCERTAIN (exit 2), not SAME.

    Raises
    ------
    ValueError
        For ``k < 1`` or a threshold outside (0, 10).
    """
    from scipy.stats import t as student

    if k < 1:
        raise ValueError(f"looks are numbered from 1, got {k}")
    if not (0 < threshold < 10):
        raise ValueError(f"threshold must be a relative change in (0, 10), got {threshold!r}")
    x = np.asarray(d, dtype=float)
    x = x[np.isfinite(x)]
    final = k >= cfg.looks
    level = nominal_levels(cfg)[min(k, cfg.looks) - 1]
    thr = math.log1p(threshold)
    est = float(x.mean()) if x.size else 0.0
    low = high = p = None
    decision: Decision = None
    if x.size >= 2:
        se = float(x.std(ddof=1)) / math.sqrt(x.size)
        df = x.size - 1
        q = float(student.isf(level, df)) if level > 0 else math.inf
        low, high = est - q * se, est + q * se
        p = float(student.sf(est / se, df)) if se > 0 else (0.0 if est > 0 else 1.0)
        if low > 0 and est > thr:
            decision = GateStatus.SLOWER
        elif high < 0 and est < -thr:
            decision = GateStatus.FASTER
        elif high < thr:
            decision = GateStatus.SAME
    if decision is None and final:
        # no finite pair at the cap is nothing measured: undecided, never a pass
        decision = GateStatus.UNCERTAIN if x.size == 0 or abs(est) > thr else GateStatus.SAME
    return Look(k, int(x.size), est, low, high, p, level, decision, final)


def run_sequence(
    base_rounds: Sequence[Sequence[float]],
    head_rounds: Sequence[Sequence[float]],
    cfg: SequentialConfig,
    threshold: float,
) -> list[Look]:
    """Replay the sequential rule over rounds already measured: look after every
    ``cfg.step`` rounds until a decision or the cap (or the rounds run out: the
    last look then has ``decision`` None unless it decided). For simulations and
    tests; :mod:`harness.gate.check` measures between looks instead."""
    n = min(len(base_rounds), len(head_rounds))
    out = []
    for k in range(1, cfg.looks + 1):
        r = cfg.rounds_at(k)
        if r > n:
            break
        lk = look(round_pairs(base_rounds[:r], head_rounds[:r]), k, cfg, threshold)
        out.append(lk)
        if lk.decision is not None:
            break
    return out


def describe(lk: Look, threshold: float) -> str:
    """One line for a verdict's reason."""

    def pct(v):
        return f"{(math.exp(v) - 1) * 100:+.1f}%"

    ci = f", interval {pct(lk.low)}..{pct(lk.high)}" if lk.low is not None else ""
    p = f", p={lk.p_value:.2g} vs level {lk.level:.2g}" if lk.p_value is not None else ""
    what = {
        GateStatus.SLOWER: f"slower than the {threshold:.0%} threshold (crossed the sequential boundary)",
        GateStatus.FASTER: f"faster beyond the {threshold:.0%} threshold",
        GateStatus.SAME: f"within the {threshold:.0%} threshold"
        + ("" if lk.high is not None and lk.high < math.log1p(threshold) else " (not conclusive at the round cap)"),
        GateStatus.UNCERTAIN: f"beyond the {threshold:.0%} threshold but not significant at the round cap",
    }.get(lk.decision, "undecided")
    return f"{pct(lk.estimate)} over {lk.pairs} round pairs (look {lk.look}{ci}{p}): {what}"


# ----------------------------------------------------------------------------- the gate's loop


def _sequential_verdict(v, lk: Look, threshold: float):
    """``v`` (a :class:`harness.gate.decide.Verdict` of the pooled rounds) with the
    sequential decision as its status and reason."""
    v.status = lk.decision
    v.reason = describe(lk, threshold)
    v.borderline = False
    return v


def _undecided(v, why: str, k: int) -> None:
    """Make the open series' verdict ``v`` UNCERTAIN (exit 2) in place, saying ``why``
    look ``k`` could not decide it."""
    v.status = GateStatus.UNCERTAIN
    v.borderline = False
    v.reason += f"; {why}: undecided after look {k - 1}"


def decide_sequentially(inputs: dict, verdicts: dict, cfg: SequentialConfig, gate_cfg, measure, log=None) -> dict:
    """Run the sequential gate over the series of a check; returns ``{key: [Look, ...]}``.

    Parameters
    ----------
    inputs : dict
        ``{key: SeriesInput}`` of the first look (``cfg.step`` rounds a side);
        updated in place with the pooled rounds of later looks.
    verdicts : dict
        ``{key: Verdict}`` from :func:`harness.gate.decide.classify` of ``inputs``;
        updated in place. Only SLOWER/FASTER/SAME/UNCERTAIN verdicts whose two
        sides know their rounds are decided sequentially; BROKEN, NEW and REMOVED
        stay as they are, and so do series without a round split.
    gate_cfg : harness.gate.decide.GateConfig
        Thresholds per series and the statistics of the report.
    measure : callable
        ``measure(keys, look) -> {key: {"base": Side, "head": Side}}``: ``cfg.step``
        more interleaved rounds of those series (:func:`harness.gate.asvrun.measure_pair`
        in :mod:`harness.gate.check`; injected so that this stays testable).

    A series a later look did not measure is UNCERTAIN (undecided; the check
    reports the look's problem and exits 2); one that fails on head at a later
    look becomes BROKEN.
    """
    from harness.gate import decide
    from harness.gate.asvrun import pool

    open_keys, history = [], {}
    for key, v in verdicts.items():
        si = inputs[key]
        if v.status in (GateStatus.SLOWER, GateStatus.FASTER, GateStatus.SAME, GateStatus.UNCERTAIN) and (
            si.base.rounds and si.head.rounds
        ):
            open_keys.append(key)
    k = 1
    while open_keys:
        still = []
        for key in open_keys:
            si, v = inputs[key], verdicts[key]
            lk = look(round_pairs(si.base.rounds, si.head.rounds), k, cfg, v.threshold or gate_cfg.threshold)
            history.setdefault(key, []).append(lk)
            if lk.decision is not None:
                verdicts[key] = _sequential_verdict(v, lk, v.threshold or gate_cfg.threshold)
            else:
                still.append(key)
        if not still:
            break
        k += 1
        if log:
            log(f"  sequential look {k}: {len(still)} open series, {cfg.step} more rounds a side")
        table = measure(still, k)
        open_keys = []
        for key in still:
            sides = table.get(key)
            if sides is None:  # undecided: never a block on the fixed rule's word
                _undecided(verdicts[key], f"sequential look {k} did not measure it", k)
                continue
            si = inputs[key]
            pooled = decide.SeriesInput(
                si.benchmark, si.params, pool(si.base, sides["base"]), pool(si.head, sides["head"])
            )
            inputs[key] = pooled
            v = decide.classify(pooled, gate_cfg)
            if v is not None and v.status is GateStatus.BROKEN:
                v.reason = f"failed at sequential look {k}: " + v.reason
                verdicts[key] = v
                continue
            if v is None or not (pooled.base.rounds and pooled.head.rounds):
                # the rule needs each round's samples; without them this look cannot be
                # taken, and the earlier look's verdict (open, or the fixed rule's at
                # look 1) is no decision under the stated error rate: undecided, exit 2
                _undecided(verdicts[key], f"sequential look {k} lost the round split", k)
                continue
            verdicts[key] = v
            open_keys.append(key)
    return history
