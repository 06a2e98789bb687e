"""The statistics of results over seeds (Agarwal et al., NeurIPS 2021, "Deep RL at the edge of the
statistical precipice"; their library rliable is archived): the interquartile mean (IQM), 95%
stratified bootstrap confidence intervals, the probability of improvement P(X > Y) and
performance profiles, as rliable defines them. ``scripts/benchmark.py``, ``compare.py``,
``tune.py``, ``results_stats.py`` and ``curves.py`` share them.

Scores come as *strata*: one 1-D array of run scores per env (a task), the same envs in the same
order for every algorithm compared. With one env there is one stratum. The bootstrap resamples
runs with replacement within each stratum (a stratified bootstrap), ``resamples`` times, and the
interval is the percentile interval of the statistic over the resamples (rliable's default
method). NumPy only: ``trim_mean`` is scipy's, written out; the tests check both against scipy.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

LAST_EPISODES = 10  # a run's score: the mean return of its last 10 training episodes
RESAMPLES = 10_000  # from seed to seed, an interval's ends vary by < 1% of its width (std)
LEVEL = 0.95
SEED = 0

Strata = Sequence[np.ndarray]  # one array of run scores per env
Interval = tuple[float, float]


def final_score(returns: Sequence[float] | np.ndarray, last: int = LAST_EPISODES) -> float:
    """A run's score: the mean return of its last ``last`` training episodes (main.py's log line)."""
    returns = np.asarray(returns, dtype=float)
    if returns.size == 0:
        raise ValueError("a run with no finished episodes has no score")
    return float(returns[-last:].mean())


def trim_mean(x: np.ndarray, cut: float = 0.25, axis: int = -1) -> np.ndarray:
    """``scipy.stats.trim_mean(x, cut, axis)``: the mean of what is left after ``int(cut * n)``
    of the lowest and as many of the highest values along ``axis`` are cut off."""
    x = np.asarray(x, dtype=float)
    n = x.shape[axis]
    low = int(cut * n)
    if low >= n - low:
        raise ValueError(f"trim_mean cuts everything of {n} values at {cut}")
    return np.sort(x, axis=axis).take(np.arange(low, n - low), axis=axis).mean(axis=axis)


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The interquartile mean: ``scipy.stats.trim_mean(x, 0.25)``, robust to one outlying run
    and less noisy than the median."""
    return trim_mean(x, 0.25, axis)


def aggregate_iqm(*strata: np.ndarray) -> np.ndarray:
    """The IQM of all runs of all envs pooled (rliable's ``aggregate_iqm``); vectorized over the
    leading axes."""
    return iqm(np.concatenate(strata, axis=-1))


def aggregate_mean(*strata: np.ndarray) -> np.ndarray:
    """The mean over envs of each env's mean over runs (rliable's ``aggregate_mean``)."""
    return np.mean([s.mean(axis=-1) for s in strata], axis=0)


def improvement(*strata: np.ndarray) -> np.ndarray:
    """P(X > Y): the first half of ``strata`` is X's envs, the second Y's, in the same order. Per
    env, the chance that a run of X scores above a run of Y, ties counting one half (the
    Mann-Whitney U statistic over the number of pairs); averaged over envs (rliable's
    ``probability_of_improvement``)."""
    half = len(strata) // 2
    per_env = []
    for x, y in zip(strata[:half], strata[half:]):
        above = x[..., :, None] > y[..., None, :]
        tied = x[..., :, None] == y[..., None, :]
        per_env.append((above + 0.5 * tied).mean(axis=(-2, -1)))
    return np.mean(per_env, axis=0)


def profile(taus: np.ndarray) -> Callable[..., np.ndarray]:
    """The performance profile at thresholds ``taus`` (rliable's score distribution): per env the
    fraction of runs scoring above each tau, averaged over envs."""
    taus = np.asarray(taus, dtype=float)

    def fractions(*strata: np.ndarray) -> np.ndarray:
        return np.mean([(s[..., None] > taus).mean(axis=-2) for s in strata], axis=0)
    return fractions


def bootstrap(statistic: Callable[..., np.ndarray], strata: Strata, resamples: int = RESAMPLES,
              seed: int = SEED, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of ``statistic(*strata)`` under the stratified bootstrap: each
    stratum's runs resampled with replacement, apart from the others, ``resamples`` times.
    ``statistic`` takes the strata as arrays whose last axis holds the runs and may lead with a
    resample axis. Returns ``(low, high)``, each of the statistic's shape."""
    rng = np.random.default_rng(seed)
    drawn = [np.asarray(s, dtype=float)[rng.integers(0, len(s), (resamples, len(s)))]
             for s in strata]
    values = statistic(*drawn)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail], axis=0)
    return low, high


def estimate(statistic: Callable[..., np.ndarray], strata: Strata, resamples: int = RESAMPLES,
             seed: int = SEED) -> tuple[float, Interval]:
    """``statistic`` of ``strata`` and its 95% interval: ``(value, (low, high))``."""
    arrays = [np.asarray(s, dtype=float) for s in strata]
    low, high = bootstrap(statistic, arrays, resamples, seed)
    return float(statistic(*arrays)), (float(low), float(high))


def summary(strata: Strata, resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """One algorithm's scores: ``{"n", "scores", "mean", "mean_ci", "iqm", "iqm_ci"}``, ``n`` the
    runs over all strata, ``scores`` them in order, each interval 95% stratified bootstrap."""
    mean, mean_ci = estimate(aggregate_mean, strata, resamples, seed)
    middle, iqm_ci = estimate(aggregate_iqm, strata, resamples, seed)
    scores = [float(v) for s in strata for v in np.asarray(s, dtype=float)]
    return {"n": len(scores), "scores": scores, "mean": mean, "mean_ci": list(mean_ci),
            "iqm": middle, "iqm_ci": list(iqm_ci)}


def compare(x: Strata, y: Strata, resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """P(X > Y) with its 95% interval, X's and Y's runs resampled apart in each env (rliable's
    stratified independent bootstrap): ``{"p", "ci"}``."""
    if len(x) != len(y):
        raise ValueError(f"{len(x)} envs against {len(y)}: P(X > Y) compares the same envs")
    p, ci = estimate(improvement, list(x) + list(y), resamples, seed)
    return {"p": p, "ci": list(ci)}


def iqm_band(runs: np.ndarray, resamples: int = RESAMPLES,
             seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A learning curve's IQM over runs and its 95% band, point by point: ``runs`` is
    (runs, points), on one grid of env steps; returns ``(iqm, low, high)``, each (points,). One
    draw of runs serves every point, so that the band follows whole curves."""
    def by_point(r: np.ndarray) -> np.ndarray:  # (..., runs, points) -> (..., points)
        return iqm(np.swapaxes(r, -1, -2))
    runs = np.asarray(runs, dtype=float)
    low, high = bootstrap(by_point, [runs], resamples, seed)
    return by_point(runs), low, high


def profile_band(strata: Strata, taus: np.ndarray, resamples: int = RESAMPLES,
                 seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The performance profile at ``taus`` and its 95% band: ``(fractions, low, high)``."""
    arrays = [np.asarray(s, dtype=float) for s in strata]
    low, high = bootstrap(profile(taus), arrays, resamples, seed)
    return profile(taus)(*arrays), low, high


def interval_text(value: float, ci: Sequence[float], decimals: int) -> str:
    """``value [low, high]``, as the tables print an estimate and its interval."""
    return f"{value:.{decimals}f} [{ci[0]:.{decimals}f}, {ci[1]:.{decimals}f}]"


def iqm_text(scores: Sequence[float] | np.ndarray, decimals: int = 0) -> str:
    """One env's IQM over runs and its interval as text; one run: its score, said to be one."""
    if len(scores) == 1:
        return f"{scores[0]:.{decimals}f} (one seed)"
    value, ci = estimate(aggregate_iqm, [np.asarray(scores, dtype=float)])
    return interval_text(value, ci, decimals)


def normalize(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """Scores on the scale where ``low`` (a random policy) is 0 and ``high`` (a reference: human,
    a published score) is 1."""
    return (np.asarray(scores, dtype=float) - low) / (high - low)
