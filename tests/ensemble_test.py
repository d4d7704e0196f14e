"""Ensembles of networks and n-grams: EM weights, `evaluate --model_dirs`, and what it refuses."""

import json
import math
import os
import shutil

import numpy as np
import pytest

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import mixture
from nplm_tf.tools import ensemble
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib
from pipelines import per_token
from pipelines.errors import UserError
from tests import helpers


def test_em_weights_sum_to_one_and_never_lower_the_likelihood():
    rng = np.random.default_rng(0)
    probs = rng.uniform(0.01, 1, size=(3, 500)) * np.array([[1.0], [0.5], [0.2]])
    weights, trace = mixture.em_weights(probs)
    assert weights.sum() == pytest.approx(1.0) and (weights > 0).all()
    assert all(b >= a - 1e-12 for a, b in zip(trace, trace[1:]))
    assert weights[0] > weights[1] > weights[2]  # the best model takes the most weight
    same, _ = mixture.em_weights(np.stack([probs[0], probs[0]]))
    np.testing.assert_allclose(same @ np.stack([probs[0], probs[0]]), probs[0], rtol=1e-12)
    buckets = np.arange(500) % 3
    per_bucket = mixture.bucket_em_weights(probs, buckets, num_buckets=4)
    np.testing.assert_allclose(per_bucket.sum(axis=1), 1.0)
    np.testing.assert_allclose(per_bucket[3], weights)  # a bucket without tokens takes the global weights


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ens")
    paths = helpers.tiny_corpus_files(root, train=80, valid=15, test=15)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    dirs = {}
    models = {"a": {}, "b": {"seed": 8, "hidden_dim": 12}, "sl": {"shortlist": 8}, "other": {"max_vocab": 10}}
    for name, changes in models.items():
        dirs[name] = str(root / name)
        trainer.train_and_evaluate(helpers.tiny_config(**changes), dirs[name], corpus, verbose=0, export=False)
    dirs["kn3"] = str(root / "kn3")
    ngram_lib.train_ngram(3, dirs["kn3"], corpus, min_count=1, arpa=False)
    return dirs, paths, corpus


def evaluate(*args):
    return helpers.run_binary("nplm_tf.evaluate", "--format=json", *args)


def test_an_ensemble_of_one_network_is_that_network(runs):
    dirs, _, corpus = runs
    members = ensemble.Members.load([dirs["a"]], [])
    report, probs, _ = ensemble.fit_and_score(members, corpus["valid"], corpus["test"])
    assert report["em"]["weights"] == [1.0]
    assert report["em"]["perplexity"] == pytest.approx(report["members"][0]["perplexity"], rel=1e-12)
    assert report["members"][0]["perplexity"] == pytest.approx(math.exp(-np.log(probs).mean()), rel=1e-12)


def test_an_ensemble_of_two_equal_networks_is_either(runs, tmp_path):
    dirs, paths, _ = runs
    copy = str(tmp_path / "a_copy")
    shutil.copytree(dirs["a"], copy)
    result = evaluate(f"--model_dirs={dirs['a']},{copy}", f"--files={paths['test']}")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    one, two = (m["perplexity"] for m in report["members"])
    assert one == pytest.approx(two, rel=1e-12)
    assert report["em"]["perplexity"] == pytest.approx(one, rel=1e-9)
    assert sum(report["em"]["weights"]) == pytest.approx(1.0)


def test_one_network_and_an_ngram_is_todays_mixture_and_the_tokens_are_written(runs, tmp_path):
    dirs, paths, _ = runs
    per_token, fit = str(tmp_path / "ens.tsv"), str(tmp_path / "fit.json")
    result = evaluate(
        f"--model_dirs={dirs['a']}",
        f"--ngram_dir={dirs['kn3']}",
        f"--per_token={per_token}",
        f"--save_ensemble={fit}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    ours = json.loads(result.stdout)
    today = evaluate(f"--model_dir={dirs['a']}", f"--ngram_dir={dirs['kn3']}", f"--per_token={tmp_path / 'n.tsv'}")
    assert today.returncode == 0, today.stderr[-2000:]
    mixture = json.loads(today.stdout)["mixture"]
    assert ours["em"]["weights"][0] == pytest.approx(mixture["em"]["weight"], abs=1e-5)
    assert ours["em"]["perplexity"] == pytest.approx(mixture["em"]["perplexity"], rel=1e-5)
    assert ours["context_frequency"]["perplexity"] == pytest.approx(
        mixture["context_frequency"]["perplexity"], rel=1e-5
    )
    lines = open(per_token, encoding="utf-8").read().splitlines()
    assert len(lines) == ours["tokens"]
    ln_p = np.array([float(line.split("\t")[1]) for line in lines])
    assert math.exp(-ln_p.mean()) == pytest.approx(ours["context_frequency"]["perplexity"], rel=1e-5)
    saved = json.load(open(fit, encoding="utf-8"))
    assert saved["model_dirs"] == [os.path.abspath(dirs["a"])] and len(saved["em"]) == 2


def test_two_networks_and_an_ngram_mix_below_each(runs):
    dirs, _, _ = runs
    result = evaluate(f"--model_dirs={dirs['a']},{dirs['b']}", f"--ngram_dir={dirs['kn3']}")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert len(report["em"]["weights"]) == 3
    assert report["context_frequency"]["perplexity"] <= min(m["perplexity"] for m in report["members"]) * 1.001


@pytest.mark.parametrize(
    "flags,message",
    [
        (lambda d, t: [f"--model_dirs={d['a']},{d['other']}"], "has another vocabulary"),
        (lambda d, t: [f"--model_dirs={d['a']},{t}/missing"], "no directory matches"),
        (lambda d, t: [f"--model_dirs={t}/nothing*"], "no directory matches"),
        (lambda d, t: [f"--model_dirs={d['a']}"], "an ensemble needs two models at least"),
        (lambda d, t: [f"--model_dirs={d['a']}", f"--ngram_dir={t}/none"], "--ngram_dir: "),
        (lambda d, t: [f"--model_dirs={d['a']},{d['b']}", "--save_mixture"], "is for one --model_dir"),
        (lambda d, t: [f"--model_dirs={d['a']}", "--cache=1.5"], "--cache: a cache's decay must be"),
        (lambda d, t: [f"--model_dirs={d['a']}", "--cache=0.9,x"], "not 'x'"),
        (lambda d, t: [f"--model_dir={d['a']}", "--cache=0.9"], "--cache is an ensemble's member"),
        (lambda d, t: [f"--model_dirs={d['a']}", "--cache=0.9", f"--save_ensemble={t}/f.json"], "cannot serve a"),
    ],
)
def test_a_bad_ensemble_is_one_sentence_and_writes_nothing(flags, message, runs, tmp_path):
    dirs, _, _ = runs
    out = tmp_path / "tokens.tsv"
    result = evaluate(*flags(dirs, tmp_path), f"--per_token={out}")
    assert result.returncode == 1 and message in result.stderr, result.stderr[-2000:]
    assert len(helpers.error_lines(result.stderr)) == 1
    assert not out.exists()


def test_a_cache_is_one_more_member_and_its_tokens_are_the_ensembles(runs, tmp_path):
    dirs, paths, _ = runs
    out = tmp_path / "tokens.tsv"
    result = evaluate(f"--model_dirs={dirs['a']}", f"--ngram_dir={dirs['kn3']}", "--cache=0.9,1", f"--per_token={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert [m["kind"] for m in report["members"]] == ["network", "ngram", "cache", "cache"]
    assert [m["model"] for m in report["members"]][2:] == ["cache (decay 0.9)", "cache (decay 1)"]
    assert sum(report["em"]["weights"]) == pytest.approx(1.0) and min(report["em"]["weights"]) > 0
    _, ln_p, _ = per_token.read(str(out), "tokens")
    assert math.exp(-ln_p.mean()) == pytest.approx(report["context_frequency"]["perplexity"], rel=1e-6)
    fit = ensemble.fit_and_score(
        ensemble.Members.load([dirs["a"]], [dirs["kn3"]], [0.9]), runs[2]["valid"], runs[2]["test"]
    )[0]["fit"]
    assert fit["cache_decays"] == [0.9]
    path = tmp_path / "fit.json"
    ensemble.save_fit(str(path), fit)
    with pytest.raises(UserError, match="a cache of the text so far"):  # no served model keeps a cache
        ensemble.read_fit(str(path))


def test_language_model_serves_a_saved_ensemble_as_evaluate_scored_it(runs, tmp_path):
    """`nplm_tf.LanguageModel(fit.json)`: each test line's log10 P equals the ensemble's per-token file."""
    import nplm_tf

    dirs, paths, _ = runs
    per_token, fit = str(tmp_path / "ens.tsv"), str(tmp_path / "fit.json")
    result = evaluate(
        f"--model_dirs={dirs['a']},{dirs['b']}",
        f"--ngram_dir={dirs['kn3']}",
        f"--files={paths['test']}",
        f"--per_token={per_token}",
        f"--save_ensemble={fit}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    log10 = [float(line.split("\t")[2]) for line in open(per_token, encoding="utf-8")]
    model = nplm_tf.LanguageModel(fit)
    assert model.order == 3
    at = 0
    for line in open(paths["test"], encoding="utf-8"):
        words = line.split()
        if not words:
            continue
        expected = sum(log10[at : at + len(words) + 1])
        at += len(words) + 1
        assert model.score(line.strip()) == pytest.approx(expected, abs=1e-4)
    assert at == len(log10)
    with pytest.raises(Exception, match="is no ensemble's fit"):
        bad = tmp_path / "bad.json"
        bad.write_text("{}", encoding="utf-8")
        nplm_tf.LanguageModel(str(bad))


def export(*args):
    return helpers.run_binary("nplm_tf.export", *args)


@pytest.mark.parametrize("members", [["a", "sl", "kn3"], ["a", "b"]], ids=["networks_and_ngram", "networks"])
def test_an_exported_ensemble_scores_as_evaluate_and_its_next_words_sum_to_one(members, runs, tmp_path):
    """`export --ensemble=FIT`: one SavedModel whose `score` is `evaluate --model_dirs`'s per token (a short
    list among the networks, weights per context-frequency bucket with an n-gram, global without), whose
    `next_word` over every word sums to one, and which `LanguageModel` serves; a second export of the same
    version is refused and leaves the first."""
    import tensorflow as tf

    import nplm_tf

    dirs, paths, _ = runs
    networks = [dirs[m] for m in members if m != "kn3"]
    ngrams = [f"--ngram_dir={dirs['kn3']}"] if "kn3" in members else []
    per_token, fit, out = str(tmp_path / "ens.tsv"), str(tmp_path / "fit.json"), str(tmp_path / "export")
    result = evaluate(
        f"--model_dirs={','.join(networks)}",
        *ngrams,
        f"--files={paths['test']}",
        f"--per_token={per_token}",
        f"--save_ensemble={fit}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = np.array([float(line.split("\t")[1]) for line in open(per_token, encoding="utf-8")])
    result = export(f"--ensemble={fit}", f"--export_dir={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    path = json.loads(result.stdout)["export"]
    served = tf.saved_model.load(path)
    lines = [line.strip() for line in open(paths["test"], encoding="utf-8") if line.split()]
    scored = served.signatures["score"](text=tf.constant(lines))
    ln_p = scored["token_log_probs"].numpy()[scored["mask"].numpy()]
    np.testing.assert_allclose(ln_p, expected, rtol=0, atol=1e-5)
    vocab_size = json.load(open(os.path.join(path, "assets", "export.json"), encoding="utf-8"))["vocab_size"]
    top = served.signatures["next_word"](text=tf.constant(["", lines[0], "zebra the"]), k=tf.constant(vocab_size))
    np.testing.assert_allclose(top["probabilities"].numpy().sum(axis=1), 1.0, atol=1e-5)
    model = nplm_tf.LanguageModel(path)
    assert model.score(lines[0]) == pytest.approx(scored["log_prob"].numpy()[0] / math.log(10), abs=1e-4)
    again = export(f"--ensemble={fit}", f"--export_dir={out}", "--version=1")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert os.listdir(out) == ["1"]


@pytest.mark.parametrize(
    "flags,message",
    [
        (lambda d, t, fit: [f"--ensemble={fit}"], "--ensemble writes a SavedModel to --export_dir"),
        (lambda d, t, fit: [f"--ensemble={fit}", f"--model_dir={d['a']}", f"--export_dir={t}/e"], "give one of"),
        (lambda d, t, fit: [f"--ensemble={t}/none.json", f"--export_dir={t}/e"], "--ensemble"),
        (lambda d, t, fit: [f"--ensemble={d['a']}/config.json", f"--export_dir={t}/e"], "is no ensemble's fit"),
    ],
)
def test_a_bad_ensemble_export_is_one_sentence_and_writes_nothing(flags, message, runs, tmp_path):
    dirs, _, _ = runs
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"model_dirs": [dirs["a"], dirs["b"]], "ngram_dirs": [], "em": [0.5, 0.5]}))
    result = export(*flags(dirs, tmp_path, fit))
    assert result.returncode == 1 and message in result.stderr, result.stderr[-2000:]
    assert len(helpers.error_lines(result.stderr)) == 1
    assert not (tmp_path / "e").exists()
