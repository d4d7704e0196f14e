import numpy as np
import pytest

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import interpolated
from nplm_tf.baselines import kneser_ney as kn


def data(seed, lines=60, vocab=12):
    rng = np.random.default_rng(seed)
    return kn.TokenArrays.from_lines(
        [rng.integers(0, vocab, size=rng.integers(1, 15)).tolist() for _ in range(lines)], vocab, 0
    )


@pytest.fixture(scope="module")
def model():
    return interpolated.InterpolatedTrigram(data(0), data(1), vocab_size=12)


@pytest.mark.parametrize("context", [[], [12], [12, 3], [5, 7], [11, 11], [3, 12]])
def test_distributions_sum_to_one(model, context):
    probs = model.distribution(context)
    assert (probs > 0).all() and probs.sum() == pytest.approx(1.0, abs=1e-12)


def test_token_probabilities_agree_with_distributions(model):
    lines = [[1, 2, 3, 4], [5], [7, 7, 7]]
    got = model.token_probabilities(kn.TokenArrays.from_lines(lines, 12, 0))
    expected = []
    for line in lines:
        seq = [12, *line, 0]
        expected += [model.distribution(seq[max(0, t - 2) : t])[seq[t]] for t in range(1, len(seq))]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_em_weights_beat_uniform_weights_on_validation(model):
    valid = data(1)
    fitted = ngram_lib.perplexity(model.token_probabilities(valid))
    lambdas, model.lambdas = model.lambdas, np.full_like(model.lambdas, 0.25)
    try:
        uniform = ngram_lib.perplexity(model.token_probabilities(valid))
    finally:
        model.lambdas = lambdas
    assert fitted < uniform
    assert np.allclose(model.lambdas.sum(axis=1), 1.0) and (model.lambdas >= 0).all()


def test_only_a_trigram(tmp_path):
    from pipelines import corpus

    split = corpus.Split("train", lines=("a b c",))
    with pytest.raises(kn.NgramError, match="--order=3"):
        ngram_lib.train_ngram(
            4,
            str(tmp_path),
            corpus.Corpus("c", {"train": split, "valid": split, "test": split}),
            min_count=1,
            smoothing="interpolated",
        )
