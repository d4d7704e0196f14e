"""`nplm_tf.LanguageModel`: KenLM's Python interface over a network, its mixture and an n-gram."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nplm_tf
from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import network_mixture
from nplm_tf.tools import lines as lines_lib
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError
from tests import helpers

SENTENCES = ["the cat sees a bird", "", "zebra the dog likes", "my friend likes the teacher .", "the the the"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    paths = helpers.tiny_corpus_files(root, train=120)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    out = {"root": root, "kn3": str(root / "kn3"), "kn2": str(root / "kn2")}
    ngram_lib.train_ngram(3, out["kn3"], corpus, min_count=1)
    ngram_lib.train_ngram(2, out["kn2"], corpus, min_count=1)
    runs = {
        "softmax": {"order": 4, "epochs": 1},
        "class": {"shortlist": 8, "epochs": 1},
        "selfnorm": {"order": 4, "epochs": 4, "self_normalize": 0.5},  # raw scoring's
    }
    for name, changes in runs.items():
        out[name] = str(root / name)
        trainer.train_and_evaluate(helpers.tiny_config(**changes), out[name], corpus, verbose=0)
    # The class short list keeps a fitted mixture with the trigram, as evaluate --save_mixture keeps it.
    scorer = lines_lib.LineScorer(out["class"], out["kn3"], mode="mixture")
    report = {"fit": {"ngram_dir": out["kn3"], "context_frequency": scorer.weights.tolist(), "ngram_order": 3}}
    report["fit"]["ngram_digest"] = ngram_lib.digest(scorer.ngram)
    network_mixture.save_fit(out["class"], report)
    return out


def test_an_ngram_directory_gives_what_the_kenlm_module_gives_call_for_call(models):
    import kenlm

    ours = nplm_tf.LanguageModel(models["kn3"])
    theirs = kenlm.Model(models["kn3"] + "/model.arpa")
    assert ours.order == theirs.order == 3
    for sentence in SENTENCES:
        for bos in (True, False):
            for eos in (True, False):
                a, b = list(ours.full_scores(sentence, bos, eos)), list(theirs.full_scores(sentence, bos, eos))
                assert [x[1:] for x in a] == [tuple(y[1:]) for y in b]  # matched lengths and OOVs
                np.testing.assert_allclose([x[0] for x in a], [y[0] for y in b], rtol=0, atol=1e-5)
                assert ours.score(sentence, bos, eos) == pytest.approx(theirs.score(sentence, bos, eos), abs=1e-5)
        assert ours.perplexity(sentence) == pytest.approx(theirs.perplexity(sentence), rel=1e-5)
    state, out, k_state, k_out = nplm_tf.State(), nplm_tf.State(), kenlm.State(), kenlm.State()
    ours.BeginSentenceWrite(state)
    theirs.BeginSentenceWrite(k_state)
    for word in "the dog zebra likes a".split():
        assert ours.BaseScore(state, word, out) == pytest.approx(theirs.BaseScore(k_state, word, k_out), abs=1e-5)
        full, k_full = ours.BaseFullScore(out, "bird", state), theirs.BaseFullScore(k_out, "bird", k_state)
        assert (full.ngram_length, full.oov) == (k_full.ngram_length, k_full.oov)
        state, out, k_state, k_out = out, state, k_out, k_state
    ours.NullContextWrite(state)
    theirs.NullContextWrite(k_state)
    assert ours.BaseScore(state, "the", out) == pytest.approx(theirs.BaseScore(k_state, "the", k_out), abs=1e-5)
    assert ("the" in ours, "zebra" in ours) == ("the" in theirs, "zebra" in theirs) == (True, False)


@pytest.mark.parametrize("name", ["softmax", "class"])
def test_a_network_and_its_mixture_score_what_query_scores(models, name):
    for mixture in (False, True):
        model = nplm_tf.LanguageModel(models[name], mixture=mixture)
        mode = "mixture" if mixture and name == "class" else "network"
        scorer = lines_lib.LineScorer(models[name], models["kn3"] if mode == "mixture" else None, mode)
        for sentence, expected in zip(SENTENCES, scorer.score(SENTENCES), strict=True):
            scores = list(model.full_scores(sentence))
            # one context at a time against whole lines: the same float32 logits up to a matmul's rounding
            np.testing.assert_allclose([s[0] for s in scores], expected.log10, rtol=0, atol=1e-6)
            assert [s[2] for s in scores] == (expected.ids == 1).tolist()
            assert model.score(sentence) == pytest.approx(expected.total, abs=1e-6)
    assert nplm_tf.LanguageModel(models["class"]).order == 3
    assert nplm_tf.LanguageModel(models["softmax"]).order == 4


def test_the_export_of_a_model_directory_is_read_as_the_directory(models):
    exported = nplm_tf.LanguageModel(models["softmax"] + "/export/1")
    direct = nplm_tf.LanguageModel(models["softmax"])
    assert exported.score("the cat sees a bird") == direct.score("the cat sees a bird")


def test_an_export_copied_anywhere_is_read_in_numpy_as_its_model(models, tmp_path):
    """An export carries its network's own files (assets/model): copied away from its model directory, it is
    read without TensorFlow and scores as the model directory does (the full softmax, and a short list with its
    tail n-gram)."""
    import shutil

    code = (
        "import sys, nplm_tf; print(*[nplm_tf.LanguageModel(p).score('the cat sees a zebra') for p in sys.argv[1:]],"
        " 'tensorflow' in sys.modules)"
    )
    copies = []
    for name in ("softmax", "class"):
        copies.append(str(shutil.copytree(os.path.join(models[name], "export", "1"), tmp_path / name)))
        assert os.path.isfile(os.path.join(copies[-1], "assets", "model", "best.weights.h5"))
    env = dict(os.environ, **helpers.without_tensorflow(tmp_path))  # importing TensorFlow fails there
    done = subprocess.run(
        [sys.executable, "-c", code, *copies], env=env, capture_output=True, text=True, cwd=helpers.ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    *scores, loaded = done.stdout.split()
    assert loaded == "False"
    for name, score in zip(("softmax", "class"), scores):
        assert float(score) == pytest.approx(
            nplm_tf.LanguageModel(models[name], mixture=False).score("the cat sees a zebra")
        )


def test_a_score_depends_only_on_the_states_last_words_and_states_copy_compare_and_hash(models):
    model = nplm_tf.LanguageModel(models["softmax"])  # n = 4: three words of context
    a, b, out = nplm_tf.State(), nplm_tf.State(), nplm_tf.State()
    model.BeginSentenceWrite(a)
    model.BeginSentenceWrite(b)
    for word in "my friend likes the".split():
        model.BaseScore(a, word, out)
        a = copy.copy(out)
    for word in "a friend likes the".split():
        model.BaseScore(b, word, out)
        b = nplm_tf.State(out)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1  # the same last three words
    assert model.BaseScore(a, "cat", out) == model.BaseScore(b, "cat", nplm_tf.State())
    kept = copy.copy(a)
    model.BaseScore(a, "dog", a)  # in place: a moves on, its copy does not
    assert kept != a and model.BaseScore(kept, "cat", out) == model.BaseScore(b, "cat", out)


def test_the_cache_never_changes_a_result_and_keeps_its_bound(models):
    uncached = nplm_tf.LanguageModel(models["class"], cache_size=1)
    cached = nplm_tf.LanguageModel(models["class"], cache_size=3)  # fewer than a sentence's contexts
    for _ in range(2):
        for sentence in SENTENCES:
            assert list(cached.full_scores(sentence)) == list(uncached.full_scores(sentence))
            assert len(cached._cache) <= 3 and len(uncached._cache) <= 1
    states, words, expected = [], [], []
    for sentence in SENTENCES[:3]:
        state, out = nplm_tf.State(), nplm_tf.State()
        cached.BeginSentenceWrite(state)
        for word in sentence.split():
            states.append(nplm_tf.State(state))
            words.append(word)
            expected.append(cached.BaseScore(state, word, out))
            state, out = out, state
    cached._cache.clear()  # every context new: computed in one pass
    batch = cached.score_batch(states, words)
    assert len(cached._cache) <= 3
    np.testing.assert_allclose(batch, expected, rtol=0, atol=1e-6)  # a batch's matmul rounds its own way


def test_bad_input_is_one_sentence(models, tmp_path):
    with pytest.raises(UserError, match="is no model: give a model directory"):
        nplm_tf.LanguageModel(str(tmp_path))
    with pytest.raises(UserError, match="needs a path"):
        nplm_tf.LanguageModel(3)
    with pytest.raises(UserError, match="cache_size=0 must be a positive integer"):
        nplm_tf.LanguageModel(models["kn3"], cache_size=0)
    model, other = nplm_tf.LanguageModel(models["kn3"]), nplm_tf.LanguageModel(models["kn2"])
    state, out = nplm_tf.State(), nplm_tf.State()
    with pytest.raises(UserError, match="this state was never set"):
        model.BaseScore(state, "the", out)
    other.BeginSentenceWrite(state)
    with pytest.raises(UserError, match="belongs to another model"):
        model.BaseScore(state, "the", out)
    model.BeginSentenceWrite(state)
    with pytest.raises(UserError, match="a word must be a string, not int"):
        model.BaseScore(state, 7, out)
    with pytest.raises(UserError, match="a sentence must be a string, not list"):
        model.score(["the", "cat"])
    with pytest.raises(UserError, match=r"k=-1 must be an integer in \[0, \|V\| = "):
        model.top_words(state, -1)
    with pytest.raises(UserError, match="seed=1.5 must be an integer"):
        model.sample_word(state, 1.5)
    with pytest.raises(UserError, match=r"temperature=0 must be above 0 \(greedy: `top_words\(state, 1\)`\)"):
        model.sample_word(state, 1, temperature=0)


@pytest.mark.parametrize("name,mixture", [("kn3", True), ("class", True), ("class", False), ("softmax", True)])
def test_the_next_words_are_the_distributions_best_and_drawn_from_it(models, name, mixture):
    """`top_words` is the next-word distribution's best, ties to the lower id, whoever ranks it (an n-gram's or
    a mixture's whole distribution; a lone network's head, a class tail's without the distribution);
    `sample_word` draws what its seed says, and never `<unk>` unless allowed."""
    model = nplm_tf.LanguageModel(models[name], mixture=mixture)
    start, state = nplm_tf.State(), nplm_tf.State()
    model.BeginSentenceWrite(start)
    model.BaseScore(start, "the", state)
    log10 = model.next_word_log10(state)
    order = np.argsort(-log10, kind="stable")
    for k in (0, 1, 5, model.vocab_size):
        top = model.top_words(state, k)
        assert [word for word, _ in top] == [model.vocab.words[i] for i in order[:k]]
        np.testing.assert_allclose([value for _, value in top], log10[order[:k]], rtol=0, atol=1e-6)
    drawn = [model.sample_word(state, seed) for seed in range(300)]
    assert drawn == [model.sample_word(state, seed) for seed in range(300)]
    assert "<unk>" not in drawn and len(set(drawn)) > 3


def test_it_loads_and_scores_without_tensorflow(models, tmp_path):
    code = (
        "import sys, nplm_tf; m = nplm_tf.LanguageModel(sys.argv[1]); n = nplm_tf.LanguageModel(sys.argv[2]);"
        "print(m.score('the cat sees a bird'), n.score('the cat'), 'tensorflow' in sys.modules)"
    )
    env = dict(os.environ, **helpers.without_tensorflow(tmp_path))  # importing TensorFlow fails there
    done = subprocess.run(
        [sys.executable, "-c", code, models["class"], models["kn3"]],
        env=env,
        capture_output=True,
        text=True,
        cwd=helpers.ROOT,
    )
    assert done.returncode == 0 and done.stdout.split()[-1] == "False", done.stderr[-2000:]


def test_the_decoder_benchmark_times_every_kind_of_call_for_both_models(models, tmp_path):
    arpa = os.path.join(models["kn3"], "model.arpa")
    args = ["--model_dir", models["softmax"], "--arpa", arpa, "--rounds=2", "--contexts=30", "--batch=4", "--beam=3"]
    result = helpers.run_binary(
        "benchmarks.language_model", *args, "--words_per_state=5", env=helpers.without_tensorflow(tmp_path)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout)
    kinds = ("cached", "new", "new_warm", "batched", "batched_warm")
    for name in ("nplm", "kenlm"):
        assert all(figures[name][kind] > 0 and len(figures[name][f"{kind}_rounds"]) == 2 for kind in kinds)
    args[1] = models["selfnorm"]  # and raw scoring beside them
    result = helpers.run_binary(
        "benchmarks.language_model", *args, "--words_per_state=5", "--raw", env=helpers.without_tensorflow(tmp_path)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout)
    assert all(figures["nplm_raw"][kind] > 0 for kind in kinds) and figures["raw_over_exact_new"] > 0
    assert figures["premultiplied_bytes"] == 3 * 21 * 17 * 4  # (n − 1)·(|V| + 1)·(h + 1) float32


def test_raw_scores_are_the_networks_outputs_from_the_precomputed_first_layer(models):
    """normalized=False: each BaseScore is y_w·log10 e of the full forward pass, its hidden layer from the tables
    Q_k = C·H_k equal to tanh(d + H·x) to float32 rounding."""
    raw = nplm_tf.LanguageModel(models["selfnorm"], normalized=False)
    network = raw.network
    rng = np.random.default_rng(3)
    rows = rng.integers(0, network.vocab_size + 1, size=(20, network.context_size))  # <s> (|V|) among them
    hidden = network.hidden(rows)[0]
    y = network.logits(network.hidden(rows))
    for r, row in enumerate(rows):
        from_tables = network.raw_hidden(tuple(row))
        np.testing.assert_allclose(from_tables[:-1], hidden[r], rtol=1e-5, atol=1e-6)
        for w in rng.integers(0, network.vocab_size, size=5):
            assert network.raw_output(from_tables, int(w)) == pytest.approx(float(y[r, w]), abs=1e-5)
        np.testing.assert_allclose(network.raw_outputs(from_tables), y[r], atol=1e-5)  # every word at once
    exact = nplm_tf.LanguageModel(models["selfnorm"])
    for sentence in SENTENCES:
        state, out = nplm_tf.State(), nplm_tf.State()
        raw.BeginSentenceWrite(state)
        ids = [raw._index.get(w, 1) for w in sentence.split()] + [0]
        context = [network.bos_id] * network.context_size
        for word, i in zip(sentence.split() + ["</s>"], ids):
            expected = float(network.logits(network.hidden(np.array([context])))[0, i]) / np.log(10)
            assert raw.BaseScore(state, word, out) == pytest.approx(expected, abs=1e-5)
            assert raw.next_word_log10(state)[i] == pytest.approx(raw.BaseScore(state, word, out), abs=1e-6)
            state, out = out, state
            context = context[1:] + [i]
        # self-normalized: the raw score is near the exact one (ln Z near 0), not equal to it
        difference = abs(raw.score(sentence) - exact.score(sentence)) / (len(sentence.split()) + 1)
        assert difference < 0.5


def test_raw_scoring_refuses_what_has_no_raw_log_probability_in_one_sentence(models):
    cases = [
        (models["softmax"], "raw outputs are not log-probabilities: ln Z on valid has mean"),
        (
            models["kn3"],
            "normalized=False scores a network's raw outputs; " + models["kn3"] + " is an n-gram directory",
        ),
        (models["class"], "is a mixture: give a network's model directory (mixture=False"),
    ]
    for path, message in cases:
        with pytest.raises(UserError, match=None) as raised:
            nplm_tf.LanguageModel(path, normalized=False)
        assert message in str(raised.value) and str(raised.value).count(". ") == 0, str(raised.value)
    with pytest.raises(UserError, match="needs a full softmax with a hidden layer and no direct connections"):
        nplm_tf.LanguageModel(models["class"], mixture=False, normalized=False)


def test_raw_scoring_from_two_threads_and_a_pickled_copy_gives_one_threads_scores(models):
    import pickle
    import threading

    raw = nplm_tf.LanguageModel(models["selfnorm"], normalized=False, cache_size=4)
    alone = [raw.score(s) for s in SENTENCES * 3]
    raw._cache.clear()
    results = [None, None]

    def work(k):
        results[k] = [raw.score(s) for s in SENTENCES * 3]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0] == alone and results[1] == alone and len(raw._cache) <= 4
    copied = pickle.loads(pickle.dumps(raw))
    assert [copied.score(s) for s in SENTENCES * 3] == alone
