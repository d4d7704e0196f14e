"""benchmarks.shortlist_bound: a full-softmax network's probabilities put through the short lists' formulas."""

import json

import numpy as np
import pytest
import tensorflow as tf

from benchmarks import shortlist_bound
from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.core import run_dir
from nplm_tf.network import heads, loading, scoring
from nplm_tf.training import trainer
from nplm_tf.training.data import eval_dataset
from pipelines import corpus as corpus_lib
from tests import helpers


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bound")
    paths = helpers.tiny_corpus_files(tmp, train=150, valid=20, test=20)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    metrics = trainer.train_and_evaluate(
        helpers.tiny_config(epochs=2), str(tmp / "full"), corpus, verbose=0, export=False
    )
    config, vocab, model = loading.load_trained(str(tmp / "full"))
    ngram = kn.KneserNey(ngram_lib.token_arrays(corpus["train"], vocab), 3, vocab.size)
    return str(tmp / "full"), corpus, metrics, config, vocab, model, ngram, helpers.files_flags(paths)


def test_tail_bins_are_consecutive_and_the_tails_size_gives_one_word_each():
    unigram = np.array([0.3, 0.2, 0.2, 0.1, 0.1, 0.05, 0.03, 0.02])
    np.testing.assert_array_equal(shortlist_bound.tail_bins(unigram, 2, 1), np.zeros(6))
    np.testing.assert_array_equal(shortlist_bound.tail_bins(unigram, 2, 6), np.arange(6))
    np.testing.assert_array_equal(shortlist_bound.tail_bins(unigram, 2, 2), [0, 0, 1, 1, 1, 1])  # 0.4 | 0.6 of 0.5s


def test_the_bound_is_the_short_list_formulas_and_sums_to_one(full_run):
    _, corpus, _, config, vocab, model, ngram, _ = full_run
    n, tail_size = 6, vocab.size - 6
    dataset = eval_dataset(corpus["test"], vocab, config, model.head)
    got = shortlist_bound.bound_log_probs(model, ngram, dataset, [n], [1, 3, tail_size])
    np.testing.assert_allclose(got["full"], np.log(scoring.token_probabilities(model, dataset)), atol=1e-5)
    np.testing.assert_allclose(got[f"class_{n}_{tail_size}"], got["full"], atol=1e-9)  # a bin per word: the network

    # The class and back-off tails of nplm_tf.network.heads, given the network's logits over the list
    # (and, for the class tail, the log of its total over the tail as the tail output).
    context, target = (np.concatenate(part) for part in zip(*[(c.numpy(), t.numpy()) for c, t in dataset]))
    # In a graph, as the bound calls it: where the CPU computes bfloat16 matmuls natively (AVX512_BF16), the
    # eager call's logits differ from the graph's by up to 7e-7.
    logits = tf.cast(tf.function(lambda c: model(c, training=False))(context), tf.float64)
    tail_logit = tf.reduce_logsumexp(logits[:, n:], axis=1, keepdims=True)
    oldest_first = tf.constant(context, tf.int64)  # the dataset's order
    for kind, kind_logits, name in [
        ("class", tf.concat([logits[:, :n], tail_logit], axis=1), f"class_{n}_1"),
        ("backoff", logits[:, :n], f"backoff_{n}"),
    ]:
        expected = heads.named(kind, n, ngram.vocab_size, ngram).log_prob(kind_logits, oldest_first, target)
        np.testing.assert_allclose(got[name], expected.numpy(), atol=1e-9)

    # Every context's probabilities over the whole vocabulary sum to one in every mode.
    rows = np.repeat(np.arange(25), vocab.size)
    every = tf.data.Dataset.from_tensors((context[rows], np.tile(np.arange(vocab.size), 25)))
    sums = {
        k: np.exp(v).reshape(25, vocab.size).sum(axis=1)
        for k, v in shortlist_bound.bound_log_probs(model, ngram, every, [n], [1, 3]).items()
        if k != "target"
    }
    for name, total in sums.items():
        np.testing.assert_allclose(total, 1.0, atol=1e-9, err_msg=name)


def test_the_binary_prints_each_modes_perplexity_against_the_full_softmaxs(full_run):
    model_dir, _, metrics, *_, files_flags = full_run
    result = helpers.run_binary(
        "benchmarks.shortlist_bound",
        f"--model_dir={model_dir}",
        "--shortlists=8,5",
        "--tail_bins=1,2",
        "--tail_ngram_order=3",
        *files_flags,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["perplexity"] == pytest.approx(metrics["test_perplexity"], abs=0.006)
    assert list(out["shortlists"]) == ["5", "8"] and out["tail_ngram_order"] == 3
    for figures in out["shortlists"].values():
        assert set(figures["perplexity"]) == {"class", "class_2_bins", "backoff"}
        for mode, value in figures["perplexity"].items():
            assert figures["ratio"][mode] == pytest.approx(value / out["perplexity"], abs=5e-3)  # of rounded figures
    assert out["shortlists"]["5"]["tail_fraction"] > out["shortlists"]["8"]["tail_fraction"] > 0


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--shortlists=0"], "--shortlists=0 must be a comma-separated list of positive integers"),
        (["--tail_bins=x"], "--tail_bins=x must be a comma-separated list of positive integers"),
        (["--shortlists=5,999"], "--shortlists has 999, which is not smaller than |V| = "),
        (["--shortlists="], "--shortlists needs at least one value"),
        (["--shortlists=5", "--tail_bins=1,999"], "--tail_bins has 999, more than the "),
        (["--tail_ngram_order=-1"], "--tail_ngram_order=-1 must be 0 (train's default) or a positive order"),
    ],
)
def test_bad_flags_are_one_sentence(flags, message, full_run):
    result = helpers.run_binary("benchmarks.shortlist_bound", f"--model_dir={full_run[0]}", *flags)
    helpers.assert_one_sentence(result, message)


def test_a_directory_without_a_trained_model_is_one_sentence(tmp_path):
    result = helpers.run_binary("benchmarks.shortlist_bound", f"--model_dir={tmp_path}")
    helpers.assert_one_sentence(result, "holds no trained model")


def test_an_empty_split_is_one_sentence(full_run, tmp_path):
    model_dir, *_, files_flags = full_run
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    flags = [*files_flags[:3], f"--test_files={empty}"]
    env = helpers.without_tensorflow(tmp_path)  # refused before TensorFlow loads and the model with it
    result = helpers.run_binary(
        "benchmarks.shortlist_bound", f"--model_dir={model_dir}", "--shortlists=5", *flags, env=env
    )
    helpers.assert_one_sentence(result, "empty.txt is empty (no tokens)")


def test_the_tail_ngram_from_a_directory_must_be_kneser_ney_with_the_networks_vocabulary(full_run, tmp_path):
    """What `--ngram_dir` gets here and in nplm_tf.train (`tail.tail_ngram`): a model, of the right kind."""
    from nplm_tf.baselines import interpolated
    from nplm_tf.core.config import ConfigError
    from nplm_tf.training import tail as tail_lib
    from pipelines.errors import UserError

    _, corpus, *_, vocab, _, ngram, _ = full_run
    with pytest.raises(UserError, match="vocab.tsv does not exist"):
        tail_lib.tail_ngram(vocab, corpus, 3, str(tmp_path))
    arrays = ngram_lib.token_arrays(corpus["train"], vocab)
    for model in (interpolated.InterpolatedTrigram(arrays, arrays, vocab.size), ngram):
        ngram_lib.save(model, str(tmp_path))
        run_dir.RunDir(str(tmp_path)).save_vocab(vocab)
        if model is ngram:
            assert tail_lib.tail_ngram(vocab, corpus, 5, str(tmp_path)).order == 3  # the directory's, not `order`
        else:
            with pytest.raises(ConfigError, match="is not Kneser-Ney; a short list's tail needs one"):
                tail_lib.tail_ngram(vocab, corpus, 3, str(tmp_path))
