"""The cache of the text so far (`baselines.cache`): the formula, normalization, and a fresh start per line."""

import numpy as np
import pytest

from nplm_tf.baselines import cache
from nplm_tf.baselines.ngram_arrays import TokenArrays

V = 7
EOS, BOS = 0, V  # as `pipelines.vocabulary` numbers them: </s> is 0, <s> no predicted type


def reference(line: list[int], decay: float) -> list[float]:
    """P_cache of each word of `line` then </s>, summed term by term as the formula reads."""
    words, out = [*line, EOS], []
    for t, word in enumerate(words):
        ages = [decay ** (t - 1 - i) for i in range(t)]
        out.append((sum(a for a, w in zip(ages, words) if w == word) + 1 / V) / (sum(ages) + 1))
    return out


@pytest.mark.parametrize("decay", [1.0, 0.9, 0.5])
def test_the_cache_is_the_formula_and_starts_afresh_on_each_line(decay):
    rng = np.random.default_rng(0)
    lines = [rng.integers(1, V, size=n).tolist() for n in (1, 9, 600, 40)]  # 600 words at 0.5: rescaled
    probs = cache.UnigramCache(decay, V).token_probabilities(TokenArrays.from_lines(lines, BOS, EOS))
    expected = [p for line in lines for p in reference(line, decay)]
    np.testing.assert_allclose(probs, expected, rtol=1e-9, atol=1e-300)
    assert probs[0] == probs[2] == 1 / V  # each line's first word: nothing seen yet, uniform


def test_the_cache_sums_to_one_over_the_vocabulary_at_every_position():
    line = [3, 4, 3, 5, 3, 6, 1]
    model = cache.UnigramCache(0.8, V)
    for t in range(len(line) + 1):
        total = 0.0
        for word in range(V):  # every word of the vocabulary in position t, the words before it as they are
            candidate = [*line[:t], word] if word != EOS else line[:t]
            probs = model.token_probabilities(TokenArrays.from_lines([candidate], BOS, EOS))
            total += probs[t] if word != EOS else probs[-1]
        assert total == pytest.approx(1.0, rel=1e-12), t


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, "x", float("nan")])
def test_a_decay_outside_zero_to_one_is_refused(bad):
    with pytest.raises(ValueError, match="must be a number in"):
        cache.check_decays([0.9, bad])
