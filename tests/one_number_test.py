"""One model, one number: a model trained in mixed_bfloat16 scores alike on every path, all in float32.

Training's own test perplexity, `evaluate`, `query` (NumPy), `LanguageModel` (NumPy) and the SavedModel's
`score` each compute equation (1) and the head; they must agree within float32 rounding for every head, for a
mixture with an n-gram and for an ensemble."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from tests import helpers

HEADS = {
    "softmax": [],
    "class": ["--shortlist=8"],
    "network": ["--shortlist=8", "--tail=network"],
    "classes": ["--classes=-1"],
}
RTOL = 1e-5


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("one_number")
    paths = helpers.tiny_corpus_files(root, train=150, valid=20, test=20)
    kn = str(root / "kn3")
    built = helpers.run_binary(
        "nplm_tf.ngram", "--order=3", f"--output={kn}", "--min_count=1", *helpers.files_flags(paths)
    )
    assert built.returncode == 0, built.stderr[-2000:]
    return paths, kn


def train(paths: dict, model_dir: str, *flags: str) -> dict:
    result = helpers.run_binary(
        "nplm_tf.train",
        f"--model_dir={model_dir}",
        "--epochs=1",
        *helpers.TINY_FLAGS,
        "--precision=mixed_bfloat16",  # after TINY_FLAGS' float32: the last one given counts
        *flags,
        *helpers.files_flags(paths),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def evaluated(*flags: str) -> dict:
    result = helpers.run_binary("nplm_tf.evaluate", "--split=test", "--format=json", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def queried(paths: dict, *flags: str) -> float:
    text = open(paths["test"], encoding="utf-8").read()
    result = helpers.run_binary("nplm_tf.query", *flags, input=text)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("Perplexity including OOVs:"))
    return float(line.split("\t")[1])


def language_model(paths: dict, path: str, **kwargs) -> float:
    import nplm_tf

    model = nplm_tf.LanguageModel(path, **kwargs)
    lines = [line for line in open(paths["test"], encoding="utf-8").read().splitlines() if line.strip()]
    total = sum(model.score(line) for line in lines)
    return 10 ** (-total / sum(len(line.split()) + 1 for line in lines))


def served(paths: dict, export: str) -> float:
    import tensorflow as tf

    model = tf.saved_model.load(export)
    lines = [line for line in open(paths["test"], encoding="utf-8").read().splitlines() if line.strip()]
    out = model.signatures["score"](text=tf.constant(lines))
    return math.exp(-float(out["log_prob"].numpy().sum()) / float(out["lengths"].numpy().sum()))


def latest_export(model_dir: str) -> str:
    exports = os.path.join(model_dir, "export")
    return os.path.join(exports, max(os.listdir(exports), key=int))


def next_words_alike(model_dir: str, export: str) -> None:
    """`LanguageModel.top_words` (NumPy, the head's own ranking) gives the SavedModel's `next_word`, and
    `sample_word` draws in proportion to the next-word distribution, never `<unk>`."""
    import tensorflow as tf

    import nplm_tf

    model = nplm_tf.LanguageModel(model_dir)
    start, state = nplm_tf.State(), nplm_tf.State()
    model.BeginSentenceWrite(start)
    word = model.vocab.words[2]
    model.BaseScore(start, word, state)
    served = tf.saved_model.load(export).signatures["next_word"](text=tf.constant([word]), k=tf.constant(6))
    top = model.top_words(state, 6)
    assert [w for w, _ in top] == served["words"].numpy()[0].astype(str).tolist()
    np.testing.assert_allclose([10**v for _, v in top], served["probabilities"].numpy()[0], rtol=RTOL)
    draws = 3000
    drawn = [model.sample_word(state, seed) for seed in range(draws)]
    ids = {w: i for i, w in enumerate(model.vocab.words)}
    frequency = np.bincount([ids[w] for w in drawn], minlength=model.vocab_size) / draws
    p = 10 ** model.next_word_log10(state)
    p[1] = 0.0  # <unk>
    helpers.assert_drawn_in_proportion(frequency, p / p.sum(), draws, 5)


@pytest.mark.parametrize("head", HEADS)
def test_a_bfloat16_trained_model_gives_one_number_on_every_path(head, corpus, tmp_path):
    paths, _ = corpus
    model_dir = str(tmp_path / head)
    metrics = train(paths, model_dir, *HEADS[head])
    assert json.load(open(os.path.join(model_dir, "config.json")))["precision"] == "mixed_bfloat16"
    expected = evaluated(f"--model_dir={model_dir}")["perplexity"]
    numbers = {
        "train": metrics["test_perplexity"],
        "query": queried(paths, f"--model_dir={model_dir}"),
        "LanguageModel": language_model(paths, model_dir),
        "SavedModel": served(paths, latest_export(model_dir)),
    }
    for path, value in numbers.items():
        assert value == pytest.approx(expected, rel=RTOL), (path, numbers, expected)
    next_words_alike(model_dir, latest_export(model_dir))
    # bfloat16 is still there when asked for: another number, as it should be
    bf16 = evaluated(f"--model_dir={model_dir}", "--precision=mixed_bfloat16")["perplexity"]
    assert not np.isclose(bf16, expected, rtol=RTOL, atol=0)


def test_a_mixture_and_an_ensemble_give_one_number_on_every_path(corpus, tmp_path):
    paths, kn = corpus
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    train(paths, a)
    train(paths, b, "--seed=9")
    mixed = evaluated(f"--model_dir={a}", f"--ngram_dir={kn}", "--save_mixture")["mixture"]["context_frequency"]
    export = helpers.run_binary("nplm_tf.export", f"--model_dir={a}")
    assert export.returncode == 0, export.stderr[-2000:]
    numbers = {
        "query": queried(paths, f"--model_dir={a}"),
        "LanguageModel": language_model(paths, a),
        "SavedModel": served(paths, latest_export(a)),
    }
    for path, value in numbers.items():
        assert value == pytest.approx(mixed["perplexity"], rel=RTOL), (path, numbers, mixed)
    fit = str(tmp_path / "ensemble.json")
    ensemble = evaluated(f"--model_dirs={a},{b}", f"--ngram_dir={kn}", f"--save_ensemble={fit}")
    exported = helpers.run_binary("nplm_tf.export", f"--ensemble={fit}", f"--export_dir={tmp_path / 'e'}")
    assert exported.returncode == 0, exported.stderr[-2000:]
    numbers = {"LanguageModel": language_model(paths, fit), "SavedModel": served(paths, str(tmp_path / "e" / "1"))}
    for path, value in numbers.items():
        assert value == pytest.approx(ensemble["context_frequency"]["perplexity"], rel=RTOL), (path, numbers)
