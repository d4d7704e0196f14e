import math
import os

import numpy as np
import pytest

from nplm_tf.baselines import kneser_ney as kn
from tests import helpers

# Ids: </s>=0, <unk>=1, a=2, b=3; <s>=4.
A, B, EOS, UNK, BOS = 2, 3, 0, 1, 4


def small(order, lines=((A, B), (A, B, A))):
    return kn.KneserNey(kn.TokenArrays.from_lines([list(x) for x in lines], BOS, EOS), order, vocab_size=4)


def test_discounts_from_counts_of_counts():
    # t1..t4 = 4, 2, 1, 1: Y = 0.5, D1 = 1 - 2(.5)(2/4), D2 = 2 - 3(.5)(1/2), D3+ = 3 - 4(.5)(1/1)
    d, why = kn.discounts_from(np.array([1, 1, 1, 1, 2, 2, 3, 4, 7]), order=2)
    assert why is None
    assert d == pytest.approx((0.5, 1.25, 1.0))


def test_hand_checked_bigram_model():
    """'<s> a b </s>', '<s> a b a </s>': continuation counts a=2, b=1, </s>=2; fallback discounts."""
    model = small(2)
    assert model.orders[1].count[[EOS, UNK, A, B]].tolist() == [2, 0, 2, 1]
    assert any("discount_fallback" in w for w in model.warnings)
    unigram = model.orders[1].prob[:4]  # (a - D)/5 + γ0/4 with γ0 = 2.5/5
    np.testing.assert_allclose(unigram, [0.325, 0.125, 0.325, 0.225])
    # after a: b (2), </s> (1); S = 3, γ = 1.5/3
    np.testing.assert_allclose(model.distribution([A]), [1 / 6 + 0.5 * 0.325, 0.0625, 0.1625, 1 / 3 + 0.5 * 0.225])
    assert model.distribution([BOS])[A] == pytest.approx(0.5 + 0.5 * 0.325)


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_distributions_sum_to_one_including_unseen_contexts(order):
    rng = np.random.default_rng(order)
    lines = [rng.integers(0, 12, size=rng.integers(1, 15)).tolist() for _ in range(60)]
    model = kn.KneserNey(kn.TokenArrays.from_lines(lines, 12, 0), order, vocab_size=12)
    for context in ([], [12], [12, 3], [5, 7, 2, 9], [11, 11, 11, 11], lines[0][:4], [12, 0, 1]):
        probs = model.distribution(context)
        assert probs.shape == (12,) and (probs > 0).all()
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("order", [2, 3, 5])
def test_token_probabilities_agree_with_distributions(order):
    rng = np.random.default_rng(0)
    train = kn.TokenArrays.from_lines([rng.integers(0, 9, size=12).tolist() for _ in range(40)], 9, 0)
    lines = [rng.integers(0, 9, size=n).tolist() for n in (1, 3, 8)]
    model = kn.KneserNey(train, order, vocab_size=9)
    got = model.token_probabilities(kn.TokenArrays.from_lines(lines, 9, 0))
    expected = []
    for line in lines:
        seq = [9, *line, 0]
        expected += [model.distribution(seq[max(0, t - order + 1) : t])[seq[t]] for t in range(1, len(seq))]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def brown_arrays():
    """The Brown protocol's train, valid and test (benchmarks/README.md) as token arrays, and |V|."""
    os.environ.setdefault("NLTK_DATA", helpers.SHARED_NLTK)
    from pipelines import corpus, vocabulary

    brown = corpus.brown_corpus()
    vocab = vocabulary.build(brown["train"], 4)

    def arrays(split):
        lines = [vocab.ids(corpus.tokenize(line)) for line in brown[split].iter_lines()]
        return kn.TokenArrays.from_lines(lines, vocab.bos_id, vocab.eos_id)

    return arrays("train"), arrays("valid"), arrays("test"), vocab.size


def perplexities(model, *splits):
    return [math.exp(-np.log(model.token_probabilities(d)).mean()) for d in splits]


def test_brown_matches_kenlm_lmplz():
    """The Brown protocol (benchmarks/README.md): KenLM modified KN, valid / test perplexity for orders 3, 4, 5."""
    train, valid, test, vocab_size = brown_arrays()
    kenlm = {3: (209.63, 201.51), 4: (208.63, 200.43), 5: (208.27, 200.02)}
    for order, expected in kenlm.items():
        model = kn.KneserNey(train, order, vocab_size)
        assert perplexities(model, valid, test) == pytest.approx(expected, abs=0.006), order


def test_brown_pruned_matches_kenlm_lmplz_prune():
    """`lmplz -o 5 --prune T` on the same train (each text one line; its rare words written as one ordinary word,
    since lmplz refuses `<unk>` in its input), read back by KenLM's `query` (2026-11-28): the n-grams it keeps
    of each order 2-5, and its valid / test perplexities. Every probability and back-off weight of its ARPA is
    ours within 4.3e-6 in log10 (from the one type more, its own `<unk>`, that lmplz's unigrams share out)."""
    train, valid, test, vocab_size = brown_arrays()
    lmplz = {
        (0, 0, 1): ((271_734, 68_733, 28_522, 9_939), (208.67010, 200.70622)),
        (0, 1, 1): ((84_494, 68_733, 28_522, 9_939), (220.94149, 213.16077)),
        (0, 0, 2): ((271_734, 27_538, 8_662, 2_251), (211.37467, 203.59273)),
    }
    for thresholds, (kept, expected) in lmplz.items():
        model = kn.KneserNey(train, 5, vocab_size)
        model.prune(thresholds)
        assert tuple(model.orders[k].keys.size for k in range(2, 6)) == kept, thresholds
        assert perplexities(model, valid, test) == pytest.approx(expected, rel=3e-6), thresholds


def test_ids_are_int32_where_they_fit_and_stay_so_in_the_saved_state(tmp_path):
    """Context, word and suffix ids take 4 bytes each (keys, multiplied when looked up, stay int64)."""
    model = small(3)
    np.savez(tmp_path / "state.npz", **model.get_state())
    loaded = kn.KneserNey.from_state(np.load(tmp_path / "state.npz"))
    for k in range(1, 4):
        for m in (model, loaded):
            o = m.orders[k]
            assert (o.context.dtype, o.word.dtype, o.suffix.dtype, o.keys.dtype) == (np.int32,) * 3 + (np.int64,)
    assert kn.index_array(np.array([-1, 2**31 - 1])).dtype == np.int32
    assert kn.index_array(np.array([-1, 2**31])).dtype == np.int64  # ids past int32 are kept whole


def zipf_lines(seed, vocab=15, count=300):
    """Lines with a few frequent words and many rare n-grams: something for pruning to drop and to keep."""
    rng = np.random.default_rng(seed)
    return [rng.zipf(1.5, size=rng.integers(1, 15)).clip(0, vocab - 1).tolist() for _ in range(count)]


@pytest.mark.parametrize("order,thresholds", [(2, (0, 1)), (3, (0, 0, 1)), (4, (0, 1, 2)), (5, (0, 0, 1))])
def test_a_pruned_model_keeps_its_frequent_ngrams_and_stays_exactly_normalized(order, thresholds):
    """What pruning keeps (the n-grams seen more often than their order's threshold, whose contexts and
    suffixes are then kept too, as the lookups need), that every distribution still sums to one (the pruned p̃
    moved into γ, the kept p recomputed), that token_probabilities' back-off walk agrees with those
    distributions, and that the contexts' train counts (the mixture's buckets) keep their pruned successors'."""
    lines = zipf_lines(order)
    data = kn.TokenArrays.from_lines(lines, 15, 0)
    full, model = kn.KneserNey(data, order, 15), kn.KneserNey(data, order, 15)
    model.prune(thresholds)
    assert model.prune_thresholds == (*thresholds, *thresholds[-1:] * (order - len(thresholds)))
    for k in range(2, order + 1):
        o, threshold = model.orders[k], model.prune_thresholds[k - 1]
        assert (o.keys.size < full.orders[k].keys.size) == (threshold > 0) and np.all(np.diff(o.keys) > 0)
        kept, before = _spelled(model, k), _spelled(full, k)
        frequent = {g for g, i in before.items() if full.orders[k].raw[i] > threshold}
        assert set(kept) == frequent
        if k > 2:
            assert {g[:-1] for g in kept} | {g[1:] for g in kept} <= set(_spelled(model, k - 1))
        np.testing.assert_array_equal(o.raw, full.orders[k].raw[[before[g] for g in kept]])
    for context in ([], [15], [15, 2], lines[0][:4], lines[7][:4], [1, 1, 1, 1], [2, 3, 4, 5], [14, 14, 14]):
        probs = model.distribution(context)
        assert (probs > 0).all() and probs.sum() == pytest.approx(1.0, abs=1e-12)
    scored = lines[:40] + zipf_lines(99, count=20)
    test = kn.TokenArrays.from_lines(scored, 15, 0)
    expected = []
    for line in scored:
        seq = [15, *line, 0]
        expected += [model.distribution(seq[max(0, t - order + 1) : t])[seq[t]] for t in range(1, len(seq))]
    np.testing.assert_allclose(model.token_probabilities(test), expected, rtol=1e-12)
    assert not np.allclose(model.token_probabilities(test), full.token_probabilities(test))
    counts, unpruned = model.context_counts(test), full.context_counts(test)
    np.testing.assert_array_equal(counts[counts > 0], unpruned[counts > 0])
    # a context is uncounted only once it is pruned itself, so seen at most its order's threshold
    assert (unpruned[counts == 0] <= model.prune_thresholds[order - 2]).all()


def _spelled(model, k):
    """Order k's n-grams as {their words, oldest first: their id}."""
    spelled = {}
    for g in range(model.orders[k].keys.size):
        words, i = [], g
        for j in range(k, 0, -1):
            words.insert(0, int(model.orders[j].word[i]))
            i = model.orders[j].context[i]
        spelled[tuple(words)] = g
    return spelled


def test_pruning_with_zero_thresholds_changes_nothing_and_a_pruned_model_round_trips(tmp_path):
    data = kn.TokenArrays.from_lines(zipf_lines(1), 15, 0)
    full, model = kn.KneserNey(data, 4, 15), kn.KneserNey(data, 4, 15)
    model.prune([0, 0])
    model.prune([])
    for k in range(1, 5):
        for name in ("keys", "prob", "backoff", "suffix"):
            np.testing.assert_array_equal(getattr(model.orders[k], name), getattr(full.orders[k], name))
    model.prune(["0", "1"])  # the flag's strings
    with pytest.raises(kn.NgramError, match="pruned already"):
        model.prune([0, 2])
    np.savez(tmp_path / "pruned.npz", **model.get_state())
    loaded = kn.KneserNey.from_state(np.load(tmp_path / "pruned.npz"))
    assert loaded.prune_thresholds == (0, 1, 1, 1)
    np.testing.assert_array_equal(loaded.context_totals(), model.context_totals())
    np.testing.assert_array_equal(loaded.orders[3].pruned, model.orders[3].pruned)
    # a state written before pruning existed (no thresholds, no `pruned` arrays) still loads
    old = {name: value for name, value in full.get_state().items() if name != "prune"}
    assert not any(name.endswith("_pruned") for name in old)
    assert kn.KneserNey.from_state(old).prune_thresholds == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "values,message",
    [
        ((0, 1, 1, 1), "gives 4 thresholds for a 3-gram"),
        ((1,), "unigrams are never pruned"),
        ((0, 2, 1), "must not decrease"),
        (("0", "x"), "must be whole counts"),
        (("0", "-1"), "must not decrease"),
    ],
)
def test_bad_pruning_thresholds_say_why(values, message):
    with pytest.raises(kn.NgramError, match=message):
        kn.prune_thresholds(values, 3)


def test_an_order_the_lines_are_too_short_for_is_one_sentence():
    """One-word lines hold n-grams up to order 3 (<s> w </s>); an empty order 4 would break every lookup."""
    data = kn.TokenArrays.from_lines([[A], [B], [A]], BOS, EOS)
    assert kn.KneserNey(data, 3, vocab_size=4).orders[3].keys.size == 2
    with pytest.raises(kn.NgramError, match=r"^no train line is long enough for an n-gram of order 4 \(2 words "):
        kn.KneserNey(data, 5, vocab_size=4)


def test_pruning_that_would_empty_an_order_is_refused_and_changes_nothing():
    data = kn.TokenArrays.from_lines(zipf_lines(1), 15, 0)
    model, full = kn.KneserNey(data, 4, 15), kn.KneserNey(data, 4, 15)
    with pytest.raises(kn.NgramError, match="leaves no n-gram of order 3 .* use an order of at most 2"):
        model.prune([0, 1, 10**9])
    assert model.prune_thresholds == (0, 0, 0, 0)
    for k in range(1, 5):
        np.testing.assert_array_equal(model.orders[k].prob, full.orders[k].prob)
