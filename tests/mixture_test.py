import numpy as np
import pytest

from nplm_tf import engines
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
    assert np.log(mixture.mix([p_a, p_b], mixture.pair_table(lam)[0])).mean() >= best - 1e-6


def test_mixture_of_a_model_with_itself_changes_nothing():
    p_a, _ = random_probs(1)
    lam, _ = mixture.em_weight(p_a, p_a)
    np.testing.assert_allclose(mixture.mix([p_a, p_a], mixture.pair_table(lam)[0]), p_a, rtol=1e-12)
    np.testing.assert_allclose(mixture.mix([p_a, p_a], np.array([0.5, 0.5])), p_a, rtol=1e-12)


def test_em_prefers_the_better_model():
    rng = np.random.default_rng(2)
    good, bad = rng.uniform(0.5, 1, 500), rng.uniform(0.001, 0.01, 500)
    assert mixture.em_weight(good, bad)[0] > 0.95


@pytest.mark.parametrize("counts,expected", [([0, 1, 2, 3, 4, 7, 8, 1000], [0, 1, 2, 2, 3, 3, 4, 7])])
def test_frequency_buckets(counts, expected):
    assert mixture.frequency_buckets(np.array(counts), 8).tolist() == expected
    assert mixture.frequency_buckets(np.array(counts), 1).tolist() == [0] * len(counts)


def test_the_one_mixture_weighs_members_by_context_and_gives_both_engines_one_number():
    import tensorflow as tf

    rng = np.random.default_rng(4)
    counts = np.array([0.0, 1, 3, 9, 200, 0])
    table = rng.uniform(size=(4, 3))  # 4 buckets, 3 members
    per_token = [rng.uniform(size=6) for _ in range(3)]
    per_context = [rng.dirichlet(np.ones(5), size=6) for _ in range(3)]
    rows = table[[0, 1, 2, 3, 3, 0]]  # the count's bucket, the last one open
    weights = mixture.context_weights(table, counts)
    np.testing.assert_array_equal(weights, rows)
    np.testing.assert_array_equal(mixture.context_weights(table[:1], counts), table[0])  # one row: every context's
    expected = rows[:, 0] * per_token[0] + rows[:, 1] * per_token[1] + rows[:, 2] * per_token[2]
    np.testing.assert_allclose(mixture.mix(per_token, weights), expected, rtol=1e-15)
    expected = sum(rows[:, i : i + 1] * per_context[i] for i in range(3))
    np.testing.assert_allclose(mixture.mix(per_context, weights), expected, rtol=1e-15)
    np.testing.assert_allclose(mixture.mix(per_context, table[0]), sum(table[0, i] * per_context[i] for i in range(3)))
    # the serving graph runs the same code on tensors, to the bit
    served = mixture.context_weights(tf.constant(table), tf.constant(counts), engines.TENSORFLOW)
    np.testing.assert_array_equal(served.numpy(), weights)
    for values in (per_token, per_context):
        got = mixture.mix([tf.constant(v) for v in values], served).numpy()
        np.testing.assert_array_equal(got, mixture.mix(values, weights))


def test_a_network_and_an_n_gram_weigh_lambda_and_its_complement():
    np.testing.assert_array_equal(mixture.pair_table(0.25), [[0.25, 0.75]])
    np.testing.assert_array_equal(mixture.pair_table([0.5, 0.125]), [[0.5, 0.5], [0.125, 0.875]])


def test_bucket_weights_fit_each_bucket():
    rng = np.random.default_rng(3)
    good, bad = rng.uniform(0.5, 1, 400), rng.uniform(0.001, 0.01, 400)
    buckets = np.repeat([0, 1], 200)
    p_a = np.where(buckets == 0, good, bad)
    p_b = np.where(buckets == 0, bad, good)
    weights = mixture.bucket_weights(p_a, p_b, buckets, 3)
    assert weights[0] > 0.9 and weights[1] < 0.1
    assert 0 <= weights[2] <= 1  # no tokens: the global λ
