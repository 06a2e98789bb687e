"""analysis/stats.py against hand-computed values, scipy and rliable's definitions (its metrics_test's
score matrices); analysis/reference_scores.py's table."""
import numpy as np
import pytest
import scipy.stats

from a2c_ppo_acktr.analysis import reference_scores, stats

# rliable's tests/rliable/metrics_test.py: (runs x tasks) matrices; here one stratum per task
X = [np.array([1.0, 2, 1, 2]), np.array([2.0, 2, 1, 1])]
Y = [np.array([1.0, 2, 3]), np.array([1.0, 2, 3])]


def test_final_score_is_the_mean_of_the_last_ten_episodes():
    assert stats.final_score(range(1, 21)) == 15.5  # 11 ... 20
    assert stats.final_score([4, 6]) == 5.0  # fewer than 10: all of them
    with pytest.raises(ValueError):
        stats.final_score([])


@pytest.mark.parametrize("n", range(1, 13))
def test_iqm_is_scipys_trim_mean_at_a_quarter(n):
    x = np.random.default_rng(n).normal(size=(4, n))
    assert np.allclose(stats.iqm(x), scipy.stats.trim_mean(x, 0.25, axis=-1))


def test_iqm_by_hand():
    assert stats.iqm(np.array([1.0, 2, 3, 4, 100])) == 3.0  # 1 cut from each end of 5
    assert stats.iqm(np.array([1.0, 2, 3, 4, 5, 6, 7, 100])) == 4.5  # 2 cut: mean of 3 4 5 6
    assert stats.iqm(np.array([7.0, 1.0])) == 4.0  # nothing cut from 2


def test_aggregates_and_improvement_are_rliables():
    assert stats.aggregate_mean(*X) == 1.5 and stats.aggregate_iqm(*X) == 1.5
    assert stats.aggregate_mean(*Y) == 2.0 and stats.aggregate_iqm(*Y) == 2.0
    assert stats.improvement(*X, *Y) == pytest.approx(1 / 3)


def test_improvement_counts_ties_as_half_as_mann_whitney_does():
    x, y = np.array([1.0, 2, 2, 5]), np.array([2.0, 3, 0])
    # by hand, x's runs against y's: above 1 + 1 + 1 + 3 = 6, tied 0 + 1 + 1 + 0 = 2; of 12 pairs
    assert stats.improvement(x, y) == (6 + 2 / 2) / 12
    u = scipy.stats.mannwhitneyu(x, y, alternative="greater").statistic
    assert stats.improvement(x, y) == u / 12
    assert stats.improvement(x, x) == 0.5 and stats.improvement(y, x) == pytest.approx(1 - 7 / 12)


def test_the_interval_is_scipys_percentile_bootstrap():
    x = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0])
    ours = stats.estimate(stats.aggregate_iqm, [x], resamples=20_000, seed=1)[1]
    theirs = scipy.stats.bootstrap((x,), lambda a, axis: scipy.stats.trim_mean(a, 0.25, axis),
                                   method="percentile", n_resamples=20_000, rng=2)
    width = theirs.confidence_interval.high - theirs.confidence_interval.low
    assert ours[0] == pytest.approx(theirs.confidence_interval.low, abs=0.1 * width)
    assert ours[1] == pytest.approx(theirs.confidence_interval.high, abs=0.1 * width)


def test_the_bootstrap_is_stratified_and_seeded():
    # two envs far apart: a stratified resample always holds runs of both, so the pooled IQM
    # never reaches either env's own level
    strata = [np.array([0.0, 1, 2]), np.array([100.0, 101, 102])]
    low, high = stats.bootstrap(stats.aggregate_iqm, strata, resamples=2000)
    assert 1 < low <= high < 101
    assert (low, high) == tuple(stats.bootstrap(stats.aggregate_iqm, strata, resamples=2000))
    x = [np.random.default_rng(0).normal(size=10)]
    assert tuple(stats.bootstrap(stats.aggregate_iqm, x, resamples=2000, seed=3)) != tuple(
        stats.bootstrap(stats.aggregate_iqm, x, resamples=2000, seed=4))


def test_one_run_has_an_interval_of_one_point():
    s = stats.summary([np.array([7.0])])
    assert s == {"n": 1, "scores": [7.0], "mean": 7.0, "mean_ci": [7.0, 7.0], "iqm": 7.0,
                 "iqm_ci": [7.0, 7.0]}


def test_compare_resamples_both_sides():
    p = stats.compare([np.array([5.0, 6, 7])], [np.array([1.0, 2, 3])])
    assert p == {"p": 1.0, "ci": [1.0, 1.0]}  # every pair above, in every resample
    p = stats.compare([np.array([1.0, 3, 5])], [np.array([2.0, 4, 6])])
    assert p["p"] == pytest.approx(1 / 3) and 0 <= p["ci"][0] < 1 / 3 < p["ci"][1] <= 1
    with pytest.raises(ValueError):
        stats.compare(X, Y[:1])


def test_profile_and_its_band():
    taus = np.array([0.5, 1.5, 2.5])
    # env 1: 2 of 3 above 0.5, 1 of 3 above 1.5, 0 above 2.5; env 2: all, all, 1 of 2
    strata = [np.array([0.0, 1, 2]), np.array([2.0, 3])]
    assert np.allclose(stats.profile(taus)(*strata), [(2 / 3 + 1) / 2, (1 / 3 + 1) / 2, 0.25])
    value, low, high = stats.profile_band(strata, taus, resamples=500)
    assert np.all(low <= value) and np.all(value <= high) and low.shape == (3,)


def test_iqm_band_follows_the_curves():
    runs = np.array([[0.0, 1, 2], [1.0, 2, 3], [2.0, 3, 4], [3.0, 4, 50]])
    middle, low, high = stats.iqm_band(runs, resamples=1000)
    assert np.allclose(middle, [1.5, 2.5, 3.5])  # the outlying 50 is cut
    assert np.all(low <= middle) and np.all(middle <= high) and high[-1] <= 50


def test_normalize():
    assert np.allclose(stats.normalize([-20.7, 14.6, 21.0], -20.7, 14.6), [0, 1, 41.7 / 35.3])


@pytest.mark.parametrize("env_id, expected", [
    ("PongNoFrameskip-v4", (-20.7, 14.6, "atari")), ("ALE/Pong-v5", (-20.7, 14.6, "atari")),
    ("BreakoutNoFrameskip-v4", (1.7, 30.5, "atari")),
    ("MontezumaRevengeNoFrameskip-v4", (0.0, 4753.3, "atari")),
    ("HalfCheetah-v5", (-282.5, 12138.8, "mujoco")), ("CartPole-v1", (23.7, 475.0, "classic")),
    ("Pendulum-v1", None), ("ALE/NoSuchGame-v5", None),
])
def test_reference_scores(env_id, expected):
    assert reference_scores.bounds(env_id) == expected


def test_the_atari_table_holds_57_games():
    assert len(reference_scores.ATARI_HUMAN) == len(reference_scores.ATARI_RANDOM) == 57
    assert all(reference_scores.ATARI_HUMAN[g] > reference_scores.ATARI_RANDOM[g]
               for g in reference_scores.ATARI_HUMAN)


def test_the_random_scores_are_measured():
    """The table's random score of CartPole-v1 is what ``random_score`` measures (100 episodes,
    ~2,000 steps)."""
    assert reference_scores.random_score("CartPole-v1") == pytest.approx(
        reference_scores.OTHER["CartPole"][0], abs=0.05)
