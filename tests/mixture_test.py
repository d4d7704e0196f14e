import numpy as np
import pytest

from nplm_tf.baselines import mixture


def random_probs(seed, n=2000):
    rng = np.random.default_rng(seed)
    return rng.uniform(1e-4, 1, n), rng.uniform(1e-4, 1, n) ** 3


def test_em_increases_likelihood_and_stays_in_unit_interval():
    p_a, p_b = random_probs(0)
    lam, trace = mixture.em_weight(p_a, p_b)
    assert 0 <= lam <= 1
    assert all(b >= a - 1e-12 for a, b in zip(trace, trace[1:]))
    assert trace[-1] > trace[0]
    # a stationary point: no λ on a grid does better
    grid = np.linspace(0.001, 0.999, 999)
    best = max(np.log(g * p_a + (1 - g) * p_b).mean() for g in grid)
    assert np.log(mixture.mix(p_a, p_b, lam)).mean() >= best - 1e-6


def test_mixture_of_a_model_with_itself_changes_nothing():
    p_a, _ = random_probs(1)
    lam, _ = mixture.em_weight(p_a, p_a)
    np.testing.assert_allclose(mixture.mix(p_a, p_a, lam), p_a, rtol=1e-12)
    np.testing.assert_allclose(mixture.mix(p_a, p_a, 0.5), p_a, rtol=1e-12)


def test_em_prefers_the_better_model():
    rng = np.random.default_rng(2)
    good, bad = rng.uniform(0.5, 1, 500), rng.uniform(0.001, 0.01, 500)
    assert mixture.em_weight(good, bad)[0] > 0.95


@pytest.mark.parametrize("counts,expected", [([0, 1, 2, 3, 4, 7, 8, 1000], [0, 1, 2, 2, 3, 3, 4, 7])])
def test_frequency_buckets(counts, expected):
    assert mixture.frequency_buckets(np.array(counts), 8).tolist() == expected


def test_bucket_weights_fit_each_bucket():
    rng = np.random.default_rng(3)
    good, bad = rng.uniform(0.5, 1, 400), rng.uniform(0.001, 0.01, 400)
    buckets = np.repeat([0, 1], 200)
    p_a = np.where(buckets == 0, good, bad)
    p_b = np.where(buckets == 0, bad, good)
    weights = mixture.bucket_weights(p_a, p_b, buckets, 3)
    assert weights[0] > 0.9 and weights[1] < 0.1
    assert 0 <= weights[2] <= 1  # no tokens: the global λ
