"""The SavedModel: written by training and by nplm_tf.export, served without this package."""

import functools
import json
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import interpolated, kneser_ney, mixture, network_mixture, ngram_graph
from nplm_tf.core import run_dir
from nplm_tf.core.config import ConfigError
from nplm_tf.network import heads, loading, scoring
from nplm_tf.serving import saved_model
from nplm_tf.serving import server as server_lib
from nplm_tf.tools import lines as lines_lib
from nplm_tf.training import trainer
from nplm_tf.training.data import eval_dataset
from pipelines import corpus as corpus_lib
from tests import helpers

SPLITS = ("valid", "test")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny model trained by the real library (which also exports it), and its corpus."""
    root = tmp_path_factory.mktemp("serve")
    paths = helpers.tiny_corpus_files(root, train=80, valid=15, test=15)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    model_dir = str(root / "model")
    metrics = trainer.train_and_evaluate(helpers.tiny_config(epochs=2), model_dir, corpus, verbose=0)
    return model_dir, corpus, paths, metrics


@pytest.fixture(scope="module")
def served(run):
    model_dir, _, _, metrics = run
    return tf.saved_model.load(metrics["export"])


def test_training_writes_a_serving_layout_export(run):
    model_dir, _, _, metrics = run
    assert metrics["export"] == os.path.join(model_dir, "export", "1")
    for name in ("saved_model.pb", "variables/variables.index", "assets/vocab.tsv", "assets/export.json"):
        assert os.path.isfile(os.path.join(metrics["export"], name)), name
    info = json.load(open(os.path.join(metrics["export"], "assets", "export.json")))
    assert info["mixture"] is None and info["config"]["order"] == 3


def test_the_serving_benchmark_times_every_signature_of_one_export_or_several_in_turn(run, tmp_path):
    _, _, paths, metrics = run
    export, other = metrics["export"], str(tmp_path / "copy")
    shutil.copytree(export, other)
    corpus = helpers.files_flags(paths)
    small = ["--requests=4", "--batches=2", "--generations=2"]
    result = helpers.run_binary("benchmarks.serving", f"--export={export}", *small, *corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    (alone,) = [json.loads(line) for line in result.stdout.strip().splitlines()]
    assert alone["export"] == export and alone["next_word_ms"]["requests"] == 4 and alone["score_tokens_per_second"] > 0
    assert min(alone["generate_tokens_per_second"].values()) > 0
    result = helpers.run_binary(
        "benchmarks.serving", f"--export={export}", f"--against={other}", "--rounds=2", *small, *corpus
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.strip().splitlines()]
    assert [line["export"] for line in lines] == [export, other]
    for line in lines:  # both timed in each round: two score rates, two p50s and two pairs of generate rates
        assert len(line["score_rounds"]) == 2 and line["export_bytes"] > 0
        assert len(line["next_word_p50_rounds"]) == 2 and min(line["next_word_p50_rounds"]) > 0
        assert len(line["generate_rounds"]) == 2 and all(min(r) > 0 for r in line["generate_rounds"])
    missing = helpers.run_binary("benchmarks.serving", f"--export={export}", "--against=nowhere", *corpus)
    helpers.assert_one_sentence(missing, "nowhere holds no SavedModel")
    for name, lines, message in (("empty", [], "is empty (no tokens)"), ("short", ["a b c"], "test split has 3 words")):
        test = helpers.write_lines(str(tmp_path / f"{name}.txt"), lines)
        small_corpus = helpers.files_flags({**paths, "test": test})
        helpers.assert_one_sentence(
            helpers.run_binary("benchmarks.serving", f"--export={export}", *small_corpus), message
        )


def test_keras_file_reloads_and_trains_further(run):
    model_dir, corpus, _, _ = run
    model = keras.models.load_model(os.path.join(model_dir, run_dir.KERAS))
    config, vocab, _ = loading.load_trained(model_dir)
    before = [w.copy() for w in model.get_weights()]
    model.fit(
        eval_dataset(corpus["train"], vocab, config, heads.make(config, vocab.size)).take(3),
        epochs=1,
        verbose=0,
        shuffle=False,
    )
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_a_clean_process_serves_every_signature_and_survives_bad_input(run):
    model_dir, _, _, metrics = run
    client = os.path.join(helpers.ROOT, "tests", "serving_client.py")
    result = subprocess.run(
        [sys.executable, "-I", client, metrics["export"]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(os.path.dirname(model_dir)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["imported"] == [] and out["signatures"] == sorted(saved_model.SIGNATURES)
    vocab = run_dir.RunDir(model_dir).load_vocab()
    for name, case in out["cases"].items():
        rows = 0 if name == "empty_batch" else 1 if name != "plain" else 2
        assert len(case["next_word"]["words"]) == rows, name
        for probs in case["next_word"]["probabilities"]:
            assert len(probs) == 5 and all(0 < p <= 1 for p in probs) and probs == sorted(probs, reverse=True)
        assert all(len(w) == 10 for w in case["serving_default"]["words"])
        score = case["score"]
        assert len(score["perplexity"]) == rows and all(np.isfinite(score["perplexity"])), name
        assert all(p > 1 for p in score["perplexity"])
        assert len(case["generate"]["text"]) == rows
        for text, n in zip(case["generate"]["continuation"], case["generate"]["generated_tokens"]):
            assert 0 <= n <= 8 and len(text.split()) == n and all(w in vocab.words for w in text.split())
    assert out["cases"]["ten_thousand_words"]["score"]["lengths"] == [10_001]
    assert out["cases"]["empty_string"]["score"]["lengths"] == [1]  # only </s>
    assert out["cases"]["unknown_only"]["score"]["oov"] == [[True, True, False]]
    assert out["cases"]["invalid_utf8"]["score"]["oov"] == [[False, True, False, True, False]]
    assert out["huge_k_width"] == vocab.size and out["huge_k_sum"] == pytest.approx(1.0, abs=1e-4)
    assert out["odd_generate"]["continuation"] == [""] and out["odd_generate"]["generated_tokens"] == [0]


def windows_of(corpus, vocab, config, split="test"):
    contexts, targets = [], []
    for context, target in eval_dataset(corpus[split], vocab, config, heads.make(config, vocab.size)):
        contexts.append(context.numpy())
        targets.append(target.numpy())
    return np.concatenate(contexts), np.concatenate(targets)


def test_score_equals_evaluate_per_token(run, served):
    model_dir, corpus, paths, _ = run
    config, vocab, model = loading.load_trained(model_dir)
    expected = np.log(
        scoring.token_probabilities(model, eval_dataset(corpus["test"], vocab, config, heads.make(config, vocab.size)))
    )
    lines = [line for line in corpus["test"].iter_lines() if line.split()]
    out = served.signatures["score"](text=tf.constant(lines))
    got = out["token_log_probs"].numpy()[out["mask"].numpy()]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert out["lengths"].numpy().sum() == expected.size


def test_next_word_is_the_keras_models_argmax(run, served):
    model_dir, corpus, _, _ = run
    config, vocab, model = loading.load_trained(model_dir)
    lines = ["the cat sees", "a", "", "my friend follows the"]
    out = served.signatures["next_word"](text=tf.constant(lines), k=tf.constant(3))
    for line, ids, probs in zip(lines, out["ids"].numpy(), out["probabilities"].numpy()):
        history = [vocab.bos_id] * config.context_size + vocab.ids(line.split())
        context = np.array([history[-config.context_size :]], np.int32)  # oldest first
        p = tf.nn.softmax(model(context)).numpy()[0]
        assert ids[0] == p.argmax()
        np.testing.assert_allclose(probs, np.sort(p)[::-1][:3], rtol=1e-5)


def test_generate_is_reproducible_and_greedy_is_stepwise_argmax(served):
    gen = served.signatures["generate"]
    args = dict(
        prompt=tf.constant(["the cat", "a bird sees"]),
        max_tokens=tf.constant(6),
        top_k=tf.constant(0),
        allow_unk=tf.constant(True),  # as next_word ranks every word
    )
    sample = [
        gen(**args, temperature=tf.constant(1.0), seed=tf.constant(s, tf.int64))["text"].numpy().tolist()
        for s in (3, 3, 4)
    ]
    assert sample[0] == sample[1]
    greedy = gen(**args, temperature=tf.constant(0.0), seed=tf.constant(0, tf.int64))
    for prompt, text in zip(["the cat", "a bird sees"], greedy["text"].numpy()):
        words = prompt.split()
        for _ in range(6):
            top = served.signatures["next_word"](text=tf.constant([" ".join(words)]), k=tf.constant(1))
            word = top["words"].numpy()[0, 0].decode()
            if word == "</s>":
                break
            words.append(word)
        assert text.decode() == " ".join(words)


def test_saved_model_cli_shows_and_runs_the_export(run):
    export = run[3]["export"]
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    show = subprocess.run([cli, "show", "--dir", export, "--all"], capture_output=True, text=True, timeout=120)
    assert show.returncode == 0, show.stderr[-2000:]
    for name in saved_model.SIGNATURES:
        assert f"signature_def['{name}']" in show.stdout
    ran = subprocess.run(
        [
            cli,
            "run",
            "--dir",
            export,
            "--tag_set",
            "serve",
            "--signature_def",
            "next_word",
            "--input_exprs",
            'text=[b"the cat"];k=2',
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "words" in ran.stdout and "probabilities" in ran.stdout


def count_calls(monkeypatch, functions) -> list[str]:
    """Each call of the (module, name) `functions`, by name, from now until `monkeypatch` is undone."""
    calls = []

    def counted(name, original):
        @functools.wraps(original)  # its signature too: tf.function binds arguments by it
        def wrapper(*args, **kwargs):
            calls.append(name)
            return original(*args, **kwargs)

        return wrapper

    for module, name in functions:
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    return calls


def test_an_export_traces_each_signature_once(run, tmp_path, monkeypatch):
    model_dir = run[0]
    calls = count_calls(monkeypatch, [(server_lib.Server, name) for name in ("next_word", "score", "generate")])
    path = saved_model.export(model_dir, export_dir=str(tmp_path / "export"))
    # serving_default is next_word at k = 10; a signature traced again by the save would be counted twice
    assert sorted(calls) == ["generate", "next_word", "next_word", "score"]
    served = tf.saved_model.load(path)
    assert sorted(served.signatures) == sorted(saved_model.SIGNATURES)
    assert served.signatures["serving_default"](text=tf.constant(["the cat"]))["words"].shape == (1, 10)


@pytest.mark.parametrize("smoothing", ["kneser_ney", "interpolated"])
def test_mixture_export_serves_evaluates_probabilities(run, tmp_path, smoothing, capsys, monkeypatch):
    model_dir, corpus, paths, _ = run
    files = [f"--train_files={paths['train']}", f"--valid_files={paths['valid']}", f"--test_files={paths['test']}"]
    kn_dir = str(tmp_path / "ngram")
    assert (
        helpers.run_binary(
            "nplm_tf.ngram",
            "--order=3",
            f"--smoothing={smoothing}",
            f"--output={kn_dir}",
            "--min_count=1",
            "--corpus=files",
            *files,
        ).returncode
        == 0
    )
    work = str(tmp_path / "model")
    shutil.copytree(model_dir, work)
    # The n-gram named relative to evaluate's directory: mixture.json keeps its absolute path, so that export
    # (and training on) from another directory find it (once "no longer exists").
    evaluated = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={work}",
        "--ngram_dir=ngram",
        "--save_mixture",
        "--corpus=files",
        *files,
        cwd=str(tmp_path),
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert json.load(open(os.path.join(work, "mixture.json")))["ngram_dir"] == kn_dir
    reported = json.loads(evaluated.stdout.strip().splitlines()[-1])["mixture"]["context_frequency"]["perplexity"]
    exported = helpers.run_binary("nplm_tf.export", f"--model_dir={work}", f"--export_dir={tmp_path / 'out'}")
    assert exported.returncode == 0, exported.stderr[-3000:]
    path = json.loads(exported.stdout.strip().splitlines()[-1])["export"]
    assert path == str(tmp_path / "out" / "1")
    info = json.load(open(os.path.join(path, "assets", "export.json")))
    assert info["mixture"]["ngram_order"] == 3

    lines = [line for line in corpus["test"].iter_lines() if line.split()]
    out = tf.saved_model.load(path).signatures["score"](text=tf.constant(lines))
    served_ln = out["token_log_probs"].numpy()[out["mask"].numpy()]
    assert np.exp(-served_ln.mean()) == pytest.approx(reported, rel=1e-6)
    config, vocab, model = loading.load_trained(work)
    p_nn = scoring.token_probabilities(
        model, eval_dataset(corpus["test"], vocab, config, heads.make(config, vocab.size))
    )
    ngram = ngram_lib.load(kn_dir)
    arrays = ngram_lib.token_arrays(corpus["test"], vocab)
    weights = np.array(json.load(open(os.path.join(work, "mixture.json")))["context_frequency"])
    lam = weights[mixture.frequency_buckets(ngram.context_counts(arrays), len(weights))]
    expected = lam * p_nn + (1 - lam) * ngram.token_probabilities(arrays)
    np.testing.assert_allclose(np.exp(served_ln), expected, atol=1e-5, rtol=1e-5)
    served = tf.saved_model.load(path)
    top = served.signatures["next_word"](text=tf.constant(["the cat"]), k=tf.constant(vocab.size))
    assert top["probabilities"].numpy().sum() == pytest.approx(1.0, abs=1e-4)
    helpers.check_top_k_generation(served, "the cat", k=3)  # the mixture's ranking
    if smoothing == "kneser_ney":
        # Training on fits the mixture again, to the network trained now (its export once served the weights
        # fitted to the network as it was), and reports it in metrics.json. The refit and the export read
        # the n-gram and check its vocabulary once (each did both, and the export digested it again).
        capsys.readouterr()
        calls = count_calls(
            monkeypatch, [(ngram_lib, "load"), (network_mixture, "check_same_vocabulary"), (ngram_lib, "digest")]
        )
        extended = trainer.train_and_evaluate(helpers.tiny_config(epochs=3), work, corpus, verbose=0)
        monkeypatch.undo()
        assert sorted(calls) == ["check_same_vocabulary", "digest", "load"]
        assert "fitted the mixture with" in capsys.readouterr().out
        config, vocab, model = loading.load_trained(work)
        valid = ngram_lib.token_arrays(corpus["valid"], vocab)
        refit = mixture.bucket_weights(
            scoring.token_probabilities(
                model, eval_dataset(corpus["valid"], vocab, config, heads.make(config, vocab.size))
            ),
            ngram.token_probabilities(valid),
            mixture.frequency_buckets(ngram.context_counts(valid), len(weights)),
            len(weights),
        )
        saved = json.load(open(os.path.join(work, "mixture.json")))
        np.testing.assert_allclose(saved["context_frequency"], refit, rtol=1e-6)
        out = tf.saved_model.load(extended["export"]).signatures["score"](text=tf.constant(lines))
        served_ln = out["token_log_probs"].numpy()[out["mask"].numpy()]
        reported = extended["mixture"]["context_frequency"]["perplexity"]
        assert np.exp(-served_ln.mean()) == pytest.approx(reported, rel=1e-6)
        assert (
            json.load(open(os.path.join(work, "metrics.json")))["mixture"]["context_frequency"]["weights"]
            == (saved["context_frequency"])
        )
        # Its n-gram rebuilt on another vocabulary (once: the export failed, and metrics.json was not written),
        # then gone: training ends as before, mixture.json is left as it was, and the export has none.
        vocab_file = os.path.join(kn_dir, "vocab.tsv")
        with open(vocab_file, encoding="utf-8") as f:
            kept = f.readlines()[:-1]
        with open(vocab_file, "w", encoding="utf-8") as f:
            f.writelines(kept)
        for epochs, why in [
            (4, f"the n-gram model in {kn_dir} has another vocabulary (19 types)"),
            (5, f"its n-gram model {kn_dir} no longer exists"),
        ]:
            again = trainer.train_and_evaluate(helpers.tiny_config(epochs=epochs), work, corpus, verbose=0)
            said = capsys.readouterr().out
            assert f"not fitted to the network trained now (nor exported): {why}" in said
            assert "without the mixture" not in said  # one note for one cause (once a second, from the export)
            assert json.load(open(os.path.join(work, "mixture.json"))) == saved and "mixture" not in again
            assert json.load(open(os.path.join(again["export"], "assets", "export.json")))["mixture"] is None
            assert len(json.load(open(os.path.join(work, "metrics.json")))["epochs"]) == epochs
            shutil.rmtree(kn_dir, ignore_errors=True)  # gone for the second


def test_a_mixture_with_a_longer_n_gram_than_the_network_is_served_as_evaluate_mixes_it(run, tmp_path):
    """evaluate, query and rescore mix an n-gram of order K above n; the SavedModel keeps K - 1 words of context
    for it (the network reads the last n - 1), so that its score is evaluate's mixture token by token. export
    and generate once refused such a mixture (the graph kept n - 1 words)."""
    model_dir, corpus, paths, _ = run
    files = [f"--train_files={paths['train']}", f"--valid_files={paths['valid']}", f"--test_files={paths['test']}"]
    kn_dir, work, mixed = str(tmp_path / "kn4"), str(tmp_path / "model"), str(tmp_path / "mixed.tsv")
    built = helpers.run_binary(
        "nplm_tf.ngram", "--order=4", f"--output={kn_dir}", "--min_count=1", "--corpus=files", *files
    )
    assert built.returncode == 0, built.stderr[-2000:]
    shutil.copytree(model_dir, work)
    evaluated = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={work}",
        f"--ngram_dir={kn_dir}",
        f"--mixture_per_token={mixed}",
        "--save_mixture",
        *files,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    expected = [float(line.split("\t")[1]) for line in open(mixed, encoding="utf-8")]
    out = tmp_path / "out"
    path = saved_model.export(work, str(out))  # nplm_tf.export's call (in process: no second TensorFlow start)
    assert json.load(open(os.path.join(path, "assets", "export.json")))["mixture"]["ngram_order"] == 4
    served = tf.saved_model.load(path)
    lines = [line for line in corpus["test"].iter_lines() if line.split()]
    scored = served.signatures["score"](text=tf.constant(lines))
    np.testing.assert_allclose(scored["token_log_probs"].numpy()[scored["mask"].numpy()], expected, atol=1e-5)
    _, vocab, _ = loading.load_trained(work)
    top = served.signatures["next_word"](text=tf.constant(["the cat sat", ""]), k=tf.constant(vocab.size))
    np.testing.assert_allclose(top["probabilities"].numpy().sum(axis=1), 1.0, atol=1e-4)
    helpers.check_top_k_generation(served, "the cat sat", k=3)  # the mixture's ranking, three words of context
    alone = saved_model.export(work, str(out), mixture=False)  # export --nomixture
    assert json.load(open(os.path.join(alone, "assets", "export.json")))["mixture"] is None


def test_weights_fitted_with_an_n_gram_since_rebuilt_in_place_are_not_served_with_it(
    run, tmp_path, capsys, monkeypatch
):
    """mixture.json keeps a digest of its n-gram: rebuilt in its directory on the same vocabulary (another
    order), the n-gram no longer matches the weights, and export refuses them (training's export leaves them
    out, with a note) until they are fitted again, as query's scorer does by itself. Once the weights fitted
    with the trigram were served with the bigram."""
    model_dir, corpus, _, _ = run
    kn_dir, work = str(tmp_path / "kn"), str(tmp_path / "model")
    shutil.copytree(model_dir, work)
    ngram_lib.train_ngram(3, kn_dir, corpus, min_count=1, arpa=False)
    config, vocab, model = loading.load_trained(work)
    probs = {
        name: scoring.token_probabilities(
            model, eval_dataset(corpus[name], vocab, config, heads.make(config, vocab.size))
        )
        for name in SPLITS
    }
    report = network_mixture.fit_and_score(
        probs,
        {name: corpus[name] for name in SPLITS},
        vocab,
        network_mixture.load_checked(vocab, kn_dir),
        kn_dir,
        "test",
    )
    assert not os.path.exists(os.path.join(work, "mixture.json"))  # fitting saves nothing
    network_mixture.save_fit(work, report)
    fitted = json.load(open(os.path.join(work, "mixture.json")))
    assert saved_model.load_mixture(work, vocab)[1] == fitted
    ngram_lib.train_ngram(3, kn_dir, corpus, min_count=1, arpa=False)  # the same model again: still served
    assert saved_model.load_mixture(work, vocab)[1] == fitted
    ngram_lib.train_ngram(2, kn_dir, corpus, min_count=1, arpa=False)  # same path, same vocabulary, a bigram
    with pytest.raises(ConfigError, match="was fitted with the n-gram model in .* before it was rebuilt; fit it"):
        saved_model.load_mixture(work, vocab)
    capsys.readouterr()
    path = saved_model.export(work, str(tmp_path / "out"), mixture=None)  # training's own export
    assert "serves the network alone, without the mixture of mixture.json" in capsys.readouterr().out
    assert json.load(open(os.path.join(path, "assets", "export.json")))["mixture"] is None
    assert json.load(open(os.path.join(work, "mixture.json"))) == fitted  # refused, not changed

    queried = helpers.run_binary("nplm_tf.query", f"--model_dir={work}", f"--ngram_dir={kn_dir}", input="the cat\n")
    assert queried.returncode == 0, queried.stderr[-2000:]  # query and rescore fit the weights again, with the bigram
    assert (
        f"note: fitted the mixture with {kn_dir} on the valid split (its saved fit is for the n-gram" in queried.stderr
    )
    assert "nothing was saved" in queried.stderr  # reading tools read: the stale fit stays, still refused
    assert json.load(open(os.path.join(work, "mixture.json"))) == fitted
    # The same from a directory that keeps the stale fit and is queried without --ngram_dir: its n-gram again.
    default = helpers.run_binary("nplm_tf.query", f"--model_dir={work}", input="the cat\n")
    assert default.returncode == 0 and "its saved fit is for the n-gram" in default.stderr, default.stderr[-2000:]

    # The scorer behind query and rescore, fitting again in process: it reads the n-gram, checks its
    # vocabulary and digests it once (its fit read and checked both a second time, then digested it again).
    ngram_lib.train_ngram(3, kn_dir, corpus, min_count=1, arpa=False)
    calls = count_calls(
        monkeypatch, [(ngram_lib, "load"), (network_mixture, "check_same_vocabulary"), (ngram_lib, "digest")]
    )
    scorer = lines_lib.LineScorer(work, kn_dir, mode="mixture")
    assert sorted(calls) == ["check_same_vocabulary", "digest", "load"]
    assert json.load(open(os.path.join(work, "mixture.json")))["context_frequency"] == scorer.weights.tolist()


@pytest.mark.parametrize("order", [1, 2, 3, "interpolated", "pruned"])
def test_serving_ngrams_equal_the_numpy_models(order):
    lines = [[2, 3, 4, 2, 5], [3, 4, 6, 2], [5, 5, 2, 3, 4, 7], [4, 2, 3]]
    data = kneser_ney.TokenArrays.from_lines(lines, bos_id=8, eos_id=0)
    if order == "interpolated":
        held_out = kneser_ney.TokenArrays.from_lines([[2, 3, 4], [5, 2, 3, 6]], bos_id=8, eos_id=0)
        model = interpolated.InterpolatedTrigram(data, held_out, vocab_size=8)
    else:
        model = kneser_ney.KneserNey(data, 3 if order == "pruned" else order, vocab_size=8)
        if order == "pruned":
            model.prune([0, 1])
            assert model.orders[3].keys.size < kneser_ney.KneserNey(data, 3, vocab_size=8).orders[3].keys.size
    weights = [0.1, 0.2, 0.3, 0.4]
    served = ngram_graph.serving_model(model, weights)
    test = kneser_ney.TokenArrays.from_lines([[2, 3, 4, 7], [6, 6, 1, 2, 3]], bos_id=8, eos_id=0)
    positions = np.nonzero(test.predicted)[0]
    context = np.full((positions.size, 2), 8, np.int64)
    for j in (1, 2):
        ok = test.offset[positions] >= j
        context[ok, 2 - j] = test.tokens[positions[ok] - j]
    got = served.token_probabilities(tf.constant(context), tf.constant(test.tokens[positions])).numpy()
    np.testing.assert_array_equal(got, model.token_probabilities(test))
    # the counts a mixture's weights read are the NumPy model's; the weights are λ and 1 − λ of their buckets
    np.testing.assert_array_equal(served.context_count(tf.constant(context)).numpy(), model.context_counts(test))
    buckets = mixture.frequency_buckets(model.context_counts(test), len(weights))
    np.testing.assert_array_equal(served.mixture_table[buckets, 0], np.array(weights)[buckets])
    np.testing.assert_array_equal(served.mixture_table[buckets, 1], 1 - np.array(weights)[buckets])
    dist = served.distribution(tf.constant(context)).numpy()
    for row, ctx in zip(dist, context):
        np.testing.assert_allclose(row, model.distribution([int(c) for c in ctx]), rtol=1e-12)
        assert row.sum() == pytest.approx(1.0, abs=1e-12)


def test_export_binary_never_overwrites_and_says_why(run, tmp_path):
    model_dir = run[0]
    out = str(tmp_path / "exports")
    first = helpers.run_binary("nplm_tf.export", f"--model_dir={model_dir}", f"--export_dir={out}", "--version=7")
    assert first.returncode == 0, first.stderr[-2000:]
    stamp = os.path.getmtime(os.path.join(out, "7", "saved_model.pb"))
    again = helpers.run_binary("nplm_tf.export", f"--model_dir={model_dir}", f"--export_dir={out}", "--version=7")
    assert again.returncode == 1 and len(helpers.error_lines(again.stderr)) == 1
    assert "already exists" in helpers.error_lines(again.stderr)[0]
    assert os.path.getmtime(os.path.join(out, "7", "saved_model.pb")) == stamp
    assert sorted(os.listdir(out)) == ["7"]  # no staging directory left behind
    empty = helpers.run_binary("nplm_tf.export", f"--model_dir={tmp_path / 'nothing'}", f"--export_dir={out}")
    assert empty.returncode == 1 and "no trained model" in helpers.error_lines(empty.stderr)[0]


def test_an_export_in_another_precision_serves_evaluates_probabilities_in_it(run, tmp_path):
    """`--precision` computes the same weights in another dtype: the export's `score` is `nplm_tf.evaluate
    --precision`'s, token by token, and not the run's own precision's (the tiny run trained in float32)."""
    model_dir, _, paths, metrics = run
    out = str(tmp_path / "exports")
    exported = helpers.run_binary(
        "nplm_tf.export", f"--model_dir={model_dir}", f"--export_dir={out}", "--precision=mixed_bfloat16"
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    path = json.loads(exported.stdout.strip().splitlines()[-1])["export"]
    assert json.load(open(os.path.join(path, "assets", "export.json")))["config"]["precision"] == "mixed_bfloat16"
    per_token = str(tmp_path / "tokens.tsv")
    evaluated = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={model_dir}",
        f"--files={paths['test']}",
        f"--per_token={per_token}",
        "--precision=mixed_bfloat16",
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    expected = np.array([float(line.split("\t")[1]) for line in open(per_token, encoding="utf-8")])
    lines = [line.strip() for line in open(paths["test"], encoding="utf-8") if line.strip()]
    scored = {}
    for name, export in (("bf16", path), ("own", metrics["export"])):
        out_ = tf.saved_model.load(export).signatures["score"](text=tf.constant(lines))
        scored[name] = out_["token_log_probs"].numpy()[out_["mask"].numpy()]
    np.testing.assert_allclose(scored["bf16"], expected, atol=1e-5)
    assert np.abs(scored["own"] - expected).max() > 1e-4  # float32 is another computation


def test_top_k_generation_draws_among_next_words_best_in_proportion(served):
    helpers.check_top_k_generation(served, "the cat", k=3)


def test_generate_at_an_infinite_temperature_is_uniform_without_unk_and_a_nan_one_is_refused(run, served):
    """An infinite temperature made `<unk>`'s logit -inf/inf = NaN when `<unk>` was not allowed; a NaN one made
    every logit NaN."""
    words = run_dir.RunDir(run[0]).load_vocab().words
    gen = served.signatures["generate"]
    args = dict(prompt=tf.constant([""] * 40 * len(words)), max_tokens=tf.constant(1), top_k=tf.constant(0))
    args.update(seed=tf.constant(2, tf.int64), allow_unk=tf.constant(False))
    drawn = [t.decode() or "</s>" for t in gen(**args, temperature=tf.constant(float("inf")))["continuation"].numpy()]
    assert set(drawn) == set(words) - {"<unk>"}  # every other word, about 40 times each
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=re.escape("temperature=nan must be a number (<= 0: greedy).")
    ):
        gen(**args, temperature=tf.constant(float("nan")))


def test_next_word_and_generate_rank_and_draw_a_big_request_a_bounded_number_of_rows_at_a_time(run, monkeypatch):
    model_dir, corpus, _, _ = run
    _, vocab, model = loading.load_trained(model_dir)
    kn = kneser_ney.KneserNey(ngram_lib.token_arrays(corpus["train"], vocab), 3, vocab.size)
    for ngram in (None, ngram_graph.serving_model(kn, [0.3, 0.6])):  # a softmax's logits, a mixture's P
        helpers.check_rows_in_chunks(monkeypatch, model, vocab, os.path.join(model_dir, "vocab.tsv"), corpus, ngram)
