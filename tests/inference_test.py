"""The NumPy forward pass (`nplm_tf.inference.network`) against the TensorFlow path, head by head, and the
shell tools it serves without TensorFlow."""

from __future__ import annotations

import os

import numpy as np
import pytest

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.inference.network import NumpyNetwork
from nplm_tf.tools import lines as lines_lib
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib
from tests import helpers

HEADS = {
    "softmax": {},
    "class": {"shortlist": 8},
    "backoff": {"shortlist": 8, "tail": "backoff"},
    "sigmoid": {"shortlist": 8, "tail": "sigmoid"},
    "network": {"shortlist": 8, "tail": "network"},
    "network_direct": {"shortlist": 8, "tail": "network", "direct": True},
    "nce": {"loss": "nce", "num_sampled": 5},
    "softmax_direct_dropout": {"direct": True, "dropout": 0.1},
}
LINES = ["the cat sees a bird", "", "zebra the dog", "my friend likes the teacher .", "the"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inference")
    paths = helpers.tiny_corpus_files(root, train=120)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    out = {}
    for name, changes in HEADS.items():
        model_dir = str(root / name)
        trainer.train_and_evaluate(helpers.tiny_config(epochs=1, **changes), model_dir, corpus, verbose=0, export=False)
        out[name] = model_dir
    kn_dir = str(root / "kn3")
    ngram_lib.train_ngram(3, kn_dir, corpus, min_count=1, arpa=False)
    return out, corpus, kn_dir


@pytest.mark.parametrize("head", list(HEADS))
def test_numpy_scores_equal_tensorflows_in_float32_for_every_head(runs, head):
    model_dirs, _, _ = runs
    numpy_scores = lines_lib.LineScorer(model_dirs[head]).score(LINES)
    tf_scores = lines_lib.LineScorer(model_dirs[head], precision="float32").score(LINES)
    for ours, theirs in zip(numpy_scores, tf_scores, strict=True):
        assert ours.words == theirs.words and (ours.ids == theirs.ids).all()
        np.testing.assert_allclose(ours.log10, theirs.log10, rtol=0, atol=1e-6)


@pytest.mark.parametrize("head", list(HEADS))
def test_numpy_distributions_sum_to_one_and_give_the_scored_probabilities(runs, head):
    model_dirs, _, _ = runs
    network = NumpyNetwork.load(model_dirs[head])
    rng = np.random.default_rng(0)
    contexts = rng.integers(0, network.vocab_size + 1, size=(40, network.context_size))
    contexts[:5] = network.bos_id  # line starts
    contexts[5:10, 0] = network.bos_id
    p = network.distribution(contexts)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    lines = [[2, 3, 4, 5], [6, 2]]
    context, target = network.windows(lines)
    expected = np.log(network.distribution(context)[np.arange(len(target)), target])
    # The same float32 logits up to a matmul's rounding (a block of U's columns against all of them).
    np.testing.assert_allclose(network.line_log_probs(lines), expected, rtol=0, atol=1e-6)


def test_numpy_mixture_equals_tensorflows_and_reading_it_writes_nothing(runs, tmp_path):
    model_dirs, _, kn_dir = runs
    before = sorted(os.listdir(model_dirs["class"]))
    ours = lines_lib.LineScorer(model_dirs["class"], kn_dir, mode="mixture")
    theirs = lines_lib.LineScorer(model_dirs["class"], kn_dir, mode="mixture", precision="float32")
    np.testing.assert_allclose(ours.weights, theirs.weights, rtol=0, atol=1e-6)  # EM over the same P, to ~1e-7
    for a, b in zip(ours.score(LINES), theirs.score(LINES), strict=True):  # float32 each, by two libraries
        np.testing.assert_allclose(a.log10, b.log10, rtol=0, atol=1e-5)
    assert sorted(os.listdir(model_dirs["class"])) == before  # fitted in memory, never saved


def test_query_rescore_and_neighbors_answer_without_tensorflow(runs, tmp_path):
    model_dirs, _, kn_dir = runs
    env = helpers.without_tensorflow(tmp_path)
    text = "\n".join(LINES) + "\n"
    queried = helpers.run_binary("nplm_tf.query", f"--model_dir={model_dirs['class']}", env=env, input=text)
    assert queried.returncode == 0, queried.stderr[-2000:]
    expected = lines_lib.LineScorer(model_dirs["class"], precision="float32").score(LINES)
    totals = [float(line.split("Total: ")[1].split(" ")[0]) for line in queried.stdout.splitlines()[: len(LINES)]]
    np.testing.assert_allclose(totals, [s.total for s in expected], rtol=0, atol=1e-5)
    mixed = helpers.run_binary(
        "nplm_tf.query", f"--model_dir={model_dirs['network']}", f"--ngram_dir={kn_dir}", env=env, input=text
    )
    assert mixed.returncode == 0 and "nothing was saved" in mixed.stderr, mixed.stderr[-2000:]
    nbest = "".join(f"{i} ||| {line} ||| LM0= -1 ||| -1\n" for i, line in enumerate(LINES))
    rescored = helpers.run_binary("nplm_tf.rescore", f"--model_dir={model_dirs['nce']}", env=env, input=nbest)
    assert rescored.returncode == 0 and len(rescored.stdout.splitlines()) == len(LINES), rescored.stderr[-2000:]
    plot = str(tmp_path / "words.png")
    near = helpers.run_binary(
        "nplm_tf.neighbors", f"--model_dir={model_dirs['softmax']}", "--words=cat", "--k=3", f"--plot={plot}", env=env
    )
    assert near.returncode == 0 and near.stdout.startswith("cat:\t") and os.path.getsize(plot) > 0, near.stderr
    with_tf = helpers.run_binary(
        "nplm_tf.query", f"--model_dir={model_dirs['class']}", "--precision=float32", env=env, input=text
    )
    assert with_tf.returncode != 0  # --precision is TensorFlow's path: the stand-in refuses to load


def test_the_log_normalizer_equals_a_float64_log_sum_exp_where_float32_would_overflow_or_underflow():
    """The decoder cache's ln Z sums exp(y) unshifted and in float32; rows whose exp would overflow (y near
    100) or vanish (y near −100) are summed again shifted, and a scratch buffer reused between calls (and
    between threads) never leaks one call's values into another's."""
    import concurrent.futures

    from nplm_tf.engines import numpy_engine

    rng = np.random.default_rng(3)
    y = rng.normal(0, 3, size=(6, 5000)).astype(np.float32)
    y[1] += 95  # exp overflows float32
    y[2] -= 110  # exp underflows to zero
    y[3, 7] = 89.0  # one overflowing logit
    wide = y.astype(np.float64)
    top = wide.max(axis=1, keepdims=True)
    expected = np.log(np.exp(wide - top).sum(axis=1)) + top[:, 0]
    got = numpy_engine.log_normalizer(y)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    blocks = [rng.normal(0, 2, size=(k, 3000)).astype(np.float32) for k in (1, 64, 5, 700)]  # 700: past the limit
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(numpy_engine.log_normalizer, blocks * 3))
    for block, result in zip(blocks * 3, results, strict=True):
        wide = block.astype(np.float64)
        np.testing.assert_allclose(result, np.log(np.exp(wide).sum(axis=1)), rtol=1e-6)
    assert np.isnan(numpy_engine.log_normalizer(np.full((1, 4), np.nan, np.float32)))[0]


def test_both_engines_window_lines_as_the_text_reads_them():
    """`forward.windows` (training's pipeline, the SavedModel's `score`, the NumPy network's scoring): each word, then `</s>`,
    after its n − 1 words, `<s>`-padded at each line's start; an empty line predicts `</s>` alone."""
    import tensorflow as tf

    from nplm_tf import engines
    from nplm_tf.network import forward

    lines, bos, eos = [[5, 6, 7], [], [8]], 99, 0
    expected = []
    for ids in lines:
        padded = [bos] * 2 + ids + [eos]
        expected += [padded[i : i + 3] for i in range(len(ids) + 1)]
    expected = np.array(expected)
    flat, lengths = np.array([w for ids in lines for w in ids]), np.array([len(ids) for ids in lines])
    np.testing.assert_array_equal(forward.windows(flat, lengths, 2, bos, eos, engines.NUMPY), expected)
    window = forward.windows(tf.constant(flat), tf.constant(lengths), 2, bos, eos, engines.TENSORFLOW)
    np.testing.assert_array_equal(window.numpy(), expected)
    for engine in (engines.NUMPY, engines.TENSORFLOW):  # no line; one empty line
        assert np.shape(forward.windows(np.zeros(0, np.int64), np.zeros(0, np.int64), 2, bos, eos, engine)) == (0, 3)
        window = forward.windows(np.zeros(0, np.int64), np.array([0]), 2, bos, eos, engine)
        np.testing.assert_array_equal(window, [[bos, bos, eos]])
