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


def reference_stream(lines: list[list[int]], documents, decay: float, window: int | None) -> list[float]:
    """The formula along the text: each token's history is the words (never `</s>`) before it in its document,
    or, where `documents` is None, the last `window` words of the whole text."""
    out, history, previous = [], [], None
    for line, document in zip(lines, documents if documents is not None else [0] * len(lines)):
        if document != previous:
            history, previous = [], document
        for word in [*line, EOS]:
            kept = history[-window:] if window else history
            ages = [decay ** (len(kept) - 1 - i) for i in range(len(kept))]
            out.append((sum(a for a, w in zip(ages, kept) if w == word) + 1 / V) / (sum(ages) + 1))
            if word != EOS:
                history.append(word)
    return out


@pytest.mark.parametrize("decay", [1.0, 0.9, 0.5])
def test_a_document_of_several_lines_is_cached_across_them(decay):
    rng = np.random.default_rng(1)
    lines = [rng.integers(1, V, size=n).tolist() for n in (3, 5, 1, 300, 4, 2)]  # 300 words at 0.5: rescaled
    documents = [0, 0, 0, 1, 1, 2]
    arrays = TokenArrays.from_lines(lines, BOS, EOS)
    probs = cache.UnigramCache(decay, V).text_probabilities(arrays, documents)
    np.testing.assert_allclose(probs, reference_stream(lines, documents, decay, None), rtol=1e-9, atol=1e-300)
    # each line its own document: the line so far, as the vectorized path computes it
    alone = cache.UnigramCache(decay, V).text_probabilities(arrays, list(range(len(lines))))
    np.testing.assert_allclose(alone, reference_stream(lines, range(len(lines)), decay, None), rtol=1e-9)


@pytest.mark.parametrize("decay,window", [(1.0, 4), (0.9, 7), (0.5, 3)])
def test_a_text_without_documents_keeps_the_last_words_across_lines(decay, window):
    rng = np.random.default_rng(2)
    lines = [rng.integers(1, V, size=n).tolist() for n in (2, 6, 1, 5, 250, 3)]
    probs = cache.UnigramCache(decay, V, window).text_probabilities(TokenArrays.from_lines(lines, BOS, EOS), None)
    np.testing.assert_allclose(probs, reference_stream(lines, None, decay, window), rtol=1e-9, atol=1e-300)
    with pytest.raises(ValueError, match="window must be at least 1"):
        cache.UnigramCache(decay, V, 0)


def test_documents_are_what_the_text_marks(tmp_path):
    from pipelines import corpus

    marked = tmp_path / "marked.txt"
    marked.write_text("a b\nc\n\n\nd e\n  \nf\n\n", encoding="utf-8")
    plain = tmp_path / "plain.txt"
    plain.write_text("a b\nc\nd\n\n", encoding="utf-8")  # a blank line at the end marks nothing
    assert corpus.unit_documents(corpus.Split("t", files=(str(marked),))) == [0, 0, 1, 2]
    assert corpus.unit_documents(corpus.Split("t", files=(str(plain),))) is None
    assert corpus.unit_documents(corpus.Split("t", files=(str(plain), str(marked)))) == [0, 0, 0, 1, 1, 2, 3]
    assert corpus.unit_documents(corpus.Split("t", lines=("a b", "c", "d"))) == [0, 1, 2]  # Brown: texts
