"""The class-factored softmax (`--classes`, `heads.classes.ClassSoftmax`): P(w | C) = P(c(w) | C) · P(w | c(w),
C), exactly normalized, trained on C + S outputs an example, on every path that scores."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from nplm_tf import engines
from nplm_tf.core import config as config_lib
from nplm_tf.network import heads
from nplm_tf.network.layer import NPLMLayer
from tests import helpers

V = 31  # C = ⌈√31⌉ = 6 classes of S = 6 words, the last of one word


def brute_force(logits: np.ndarray, classes: int, size: int) -> np.ndarray:
    """P(w | C) word by word: softmax over the class outputs at w's class times softmax over its class's words."""
    y = logits.astype(np.float64)
    p = np.zeros((len(y), V))
    for w in range(V):
        c = w // size
        members = classes + np.arange(c * size, min(c * size + size, V))
        p_class = np.exp(y[:, c]) / np.exp(y[:, :classes]).sum(axis=1)
        p[:, w] = p_class * np.exp(y[:, classes + w]) / np.exp(y[:, members]).sum(axis=1)
    return p


@pytest.mark.parametrize(
    "asked,vocab,classes,size", [(-1, 31, 6, 6), (4, 10, 4, 3), (6, 10, 5, 2), (1, 10, 1, 10), (10, 10, 10, 1)]
)
def test_the_words_go_into_frequency_bands_of_equal_size_and_no_class_is_empty(asked, vocab, classes, size):
    head = heads.make(config_lib.Config(classes=asked, precision="float32"), vocab)
    assert (head.name, head.classes, head.size, head.output_size()) == ("classes", classes, size, classes + vocab)
    assert (head.classes - 1) * head.size < vocab <= head.classes * head.size
    assert heads.named("classes", head.list_size, vocab).output_size() == head.output_size()  # HeadNLL's round trip


def test_it_is_the_product_of_the_two_softmaxes_and_every_engine_agrees():
    """distribution, log_prob, top_k in both engines against the product computed word by word;
    taking a class's softmax over the wrong outputs, or leaving the class factor out, fails it."""
    head = heads.named("classes", 6, V)
    assert (head.classes, head.size) == (6, 6)
    logits = tf.random.stateless_normal([20, head.output_size()], seed=[3, 4]) * 3
    expected = brute_force(logits.numpy(), 6, 6)
    np.testing.assert_allclose(expected.sum(axis=1), 1.0, rtol=1e-12)
    contexts = tf.zeros([20, 2], tf.int64)
    np.testing.assert_allclose(head.distribution(logits, contexts).numpy(), expected, rtol=1e-9)
    np.testing.assert_allclose(head.distribution(logits.numpy(), None, engines.NUMPY), expected, rtol=1e-6)
    rows, targets = np.repeat(np.arange(20), V), np.tile(np.arange(V), 20)
    every = tf.gather(logits, rows)
    ln = head.log_prob(every, tf.gather(contexts, rows), tf.constant(targets)).numpy().reshape(20, V)
    np.testing.assert_allclose(ln, np.log(expected), rtol=1e-5, atol=1e-6)
    np_ln = head.log_prob(every.numpy(), None, targets, engines.NUMPY).reshape(20, V)
    np.testing.assert_allclose(np_ln, np.log(expected), rtol=1e-5, atol=1e-6)
    nll = head.nll(tf.constant(targets), every).numpy().reshape(20, V)
    np.testing.assert_allclose(nll, -np.log(expected), rtol=1e-5, atol=1e-6)
    for k in (1, 5, V):
        values, ids = (t.numpy() for t in head.top_k(logits, contexts, tf.constant(k)))
        ranked = np.argsort(-expected, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(ids, ranked)
        np.testing.assert_allclose(values, np.take_along_axis(expected, ranked, axis=1), rtol=1e-6)


def test_it_starts_from_the_unigram_model():
    head = heads.named("classes", 6, V)
    counts = np.arange(V, 0, -1) * 5.0
    p = head.distribution(head.initial_bias(counts)[None, :], None, engines.NUMPY)[0]
    np.testing.assert_allclose(p, (counts + 1) / (counts + 1).sum(), rtol=1e-5)


def test_training_computes_the_exact_loss_from_its_target_classes_rows_only():
    """`training_losses` is `nll` on the whole output layer, its gradients too (decay included); without decay,
    the rows of the classes no target is in get no gradient (the example costs C + S rows, not |V|)."""
    head = heads.named("classes", 6, V)
    context, target = tf.constant([[1, 2], [3, 30], [0, 0], [7, 7]]), tf.constant([3, 30, 0, 14])
    for decay in (0.1, 0.0):
        layer = NPLMLayer(V, 2, 3, 4, direct=True, weight_decay=decay, output_size=head.output_size(), output_rows=True)
        layer.build((None, 2))
        rng = np.random.default_rng(0)
        for w in layer.weights:
            w.assign(rng.normal(size=w.shape).astype("float32"))

        def run(fused, layer=layer):
            with tf.GradientTape() as tape:
                if fused:
                    nll, penalty = head.training_losses(layer, context, target)
                else:
                    nll = head.nll(target, layer(context, training=True))
                    penalty = tf.add_n(layer.losses) if layer.losses else tf.constant(0.0)
                total = tf.reduce_mean(nll) + penalty
            grads = tape.gradient(total, [w.value for w in layer.weights])
            return [nll.numpy(), float(penalty)] + [tf.convert_to_tensor(g).numpy() for g in grads]

        fused = run(True)
        for ours, reference in zip(fused, run(False), strict=True):
            np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-5)
    names = [w.path.split("/")[-1] for w in layer.weights]
    d_u = fused[2 + names.index("U")]  # (C + |V|, h): rows of the classes, then of the words
    touched = {6 + w for c in {3 // 6, 30 // 6, 0, 14 // 6} for w in range(c * 6, min(c * 6 + 6, V))}
    untouched = [r for r in range(6, 6 + V) if r not in touched]
    assert np.abs(d_u[untouched]).max() == 0 and np.abs(d_u[sorted(touched)]).max() > 0


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("classes")
    paths = helpers.tiny_corpus_files(root, train=150, valid=20, test=20)
    runs = {}
    for name, flags in (("classes", ["--classes=-1"]), ("softmax", ["--seed=9"])):
        runs[name] = str(root / name)
        result = helpers.run_binary(
            "nplm_tf.train", f"--model_dir={runs[name]}", "--epochs=2", *helpers.TINY_FLAGS, *flags,
            *helpers.files_flags(paths),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
    kn = str(root / "kn3")
    built = helpers.run_binary(
        "nplm_tf.ngram", "--order=3", f"--output={kn}", "--min_count=1", *helpers.files_flags(paths)
    )
    assert built.returncode == 0, built.stderr[-2000:]
    return paths, runs, kn, root


def test_the_savedmodel_ranks_scores_and_generates_over_the_whole_vocabulary(trained):
    paths, runs, _, _ = trained
    config = json.load(open(os.path.join(runs["classes"], "config.json")))
    assert config["classes"] == -1
    # its outputs are no one softmax, so no ln Z of them is reported (the full softmax's is)
    assert "valid_log_normalizer" not in json.load(open(os.path.join(runs["classes"], "metrics.json")))
    assert "valid_log_normalizer" in json.load(open(os.path.join(runs["softmax"], "metrics.json")))
    served = tf.saved_model.load(os.path.join(runs["classes"], "export", "1"))
    words = [line.split("\t")[0] for line in open(os.path.join(runs["classes"], "vocab.tsv"), encoding="utf-8")]
    top = served.signatures["next_word"](text=tf.constant(["the cat"]), k=tf.constant(len(words)))
    assert top["probabilities"].numpy().sum() == pytest.approx(1.0, abs=1e-5)
    assert set(top["words"].numpy()[0].astype(str)) == set(words)
    line = open(paths["test"], encoding="utf-8").readline().split() + ["</s>"]
    prefixes = [" ".join(line[:i]) for i in range(len(line))]
    ranked = served.signatures["next_word"](text=tf.constant(prefixes), k=tf.constant(len(words)))
    ranked_words = ranked["words"].numpy().astype(str)
    p = [ranked["probabilities"].numpy()[i, list(ranked_words[i]).index(w)] for i, w in enumerate(line)]
    scored = served.signatures["score"](text=tf.constant([" ".join(line[:-1])]))["token_log_probs"].numpy()[0]
    np.testing.assert_allclose(np.exp(scored[: len(line)]), p, rtol=1e-5)
    helpers.check_top_k_generation(served, "the cat", k=4)
    helpers.check_sampled_generation(served, "the cat")


def test_it_mixes_with_an_ngram_and_joins_an_ensemble_on_every_path(trained):
    import nplm_tf

    paths, runs, kn, root = trained
    lines = [line for line in open(paths["test"], encoding="utf-8").read().splitlines() if line.strip()]
    words = sum(len(line.split()) + 1 for line in lines)

    def perplexity(model) -> float:
        return 10 ** (-sum(model.score(line) for line in lines) / words)

    result = helpers.run_binary(
        "nplm_tf.evaluate", f"--model_dir={runs['classes']}", f"--ngram_dir={kn}", "--split=test", "--format=json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    mixed = json.loads(result.stdout.strip().splitlines()[-1])["mixture"]["context_frequency"]["perplexity"]
    assert perplexity(nplm_tf.LanguageModel(runs["classes"], ngram_dir=kn)) == pytest.approx(mixed, rel=1e-5)
    fit = str(root / "ensemble.json")
    both = f"--model_dirs={runs['classes']},{runs['softmax']}"
    result = helpers.run_binary(
        "nplm_tf.evaluate", both, f"--ngram_dir={kn}", f"--save_ensemble={fit}", "--split=test", "--format=json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ensemble = json.loads(result.stdout.strip().splitlines()[-1])["context_frequency"]["perplexity"]
    assert perplexity(nplm_tf.LanguageModel(fit)) == pytest.approx(ensemble, rel=1e-5)
    exported = helpers.run_binary("nplm_tf.export", f"--ensemble={fit}", f"--export_dir={root / 'e'}")
    assert exported.returncode == 0, exported.stderr[-2000:]
    out = tf.saved_model.load(str(root / "e" / "1")).signatures["score"](text=tf.constant(lines))
    served = np.exp(-float(out["log_prob"].numpy().sum()) / float(out["lengths"].numpy().sum()))
    assert served == pytest.approx(ensemble, rel=1e-5)


def test_what_cannot_hold_it_says_so_in_one_sentence(trained, tmp_path):
    paths, runs, _, _ = trained
    written = tmp_path / "model.nplm"
    nplm = helpers.run_binary(
        "nplm_tf.export", f"--model_dir={runs['classes']}", "--format=nplm", f"--export_dir={written}"
    )
    helpers.assert_one_sentence(nplm, "it is a class-factored softmax (--classes)")
    assert not written.exists()
    import nplm_tf
    from pipelines.errors import UserError

    with pytest.raises(UserError, match=r"cannot be scored so: it is a class-factored softmax \(--classes\)"):
        nplm_tf.LanguageModel(runs["classes"], normalized=False)
    for flags, message in (
        (["--classes=8", "--shortlist=5"], "is a head of its own"),
        (["--classes=8", "--self_normalize=0.5"], "is a head of its own"),
        (["--classes=-2"], "must be C ≥ 1, -1"),
        (["--classes=500"], "must be at most |V|"),
    ):
        result = helpers.run_binary(
            "nplm_tf.train", f"--model_dir={tmp_path / 'x'}", *helpers.TINY_FLAGS, *flags, *helpers.files_flags(paths)
        )
        helpers.assert_one_sentence(result, message)
        assert not os.path.exists(tmp_path / "x" / "config.json")
