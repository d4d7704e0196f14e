"""The n-gram binary, its ARPA export read back by KenLM, and mixing it with the network."""

import json
import math
import os

import pytest

from pipelines import vocabulary
from tests import helpers


@pytest.fixture(scope="module")
def corpus_flags(tmp_path_factory):
    root = tmp_path_factory.mktemp("ng")
    paths = helpers.tiny_corpus_files(root, train=150, valid=20, test=20)
    return [
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ], paths


@pytest.fixture(scope="module")
def kn3(corpus_flags, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("kn3"))
    result = helpers.run_binary("nplm_tf.ngram", "--order=3", f"--output={out}", "--min_count=1", *corpus_flags[0])
    assert result.returncode == 0, result.stderr[-3000:]
    return out, json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def test_a_vocabulary_limit_gives_the_ngram_the_networks_vocabulary(corpus_flags, tmp_path):
    from nplm_tf.core.config import Config
    from nplm_tf.training.data import prepare_vocabulary
    from pipelines import corpus as corpus_lib

    out = tmp_path / "kn2"
    result = helpers.run_binary(
        "nplm_tf.ngram", "--order=2", f"--output={out}", "--min_count=1", "--max_vocab=10", *corpus_flags[0]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(out / "metrics.json"))
    assert (metrics["vocab_size"], metrics["max_vocab"]) == (10, 10)
    paths = corpus_flags[1]
    texts = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    network = prepare_vocabulary(Config(order=3, min_count=1, max_vocab=10), texts)
    assert vocabulary.Vocabulary.load(str(out / "vocab.tsv")) == network
    assert network.size == 10 < vocabulary.build(texts["train"], 1).size


def test_ngram_binary_writes_metrics_and_arpa(kn3):
    out, printed, stderr = kn3
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["test_perplexity"] == printed["test_perplexity"] < metrics["vocab_size"]
    lines = open(os.path.join(out, "model.arpa"), encoding="utf-8").read().splitlines()
    assert lines[1] == "\\data\\" and lines[-1] == "\\end\\"
    assert lines[2] == f"ngram 1={metrics['vocab_size'] + 1}"  # + <s>
    assert sum(1 for line in lines if line.count("\t") >= 1 and len(line.split("\t")[1].split()) == 3) == int(
        lines[4].split("=")[1]
    )
    # Each stage of the build says what it does on stderr, in order; stdout holds only the results.
    stages = [
        f"building the Kneser-Ney 3-gram on {metrics['tokens']['train']:,} train tokens, |V| = {metrics['vocab_size']:,}",
        f"writing {os.path.join(out, 'model.arpa')}",
        "scoring train, valid and test",
    ]
    assert [line for line in stderr.splitlines() if line in stages] == stages, stderr[-2000:]


def kenlm_perplexity(ngram_dir, text_file: str) -> float:
    """The perplexity KenLM's own query computes from `ngram_dir`'s model.arpa on a file, in the run's words."""
    import kenlm

    from pipelines import corpus

    vocab = vocabulary.Vocabulary.load(os.path.join(ngram_dir, "vocab.tsv"))
    model = kenlm.Model(os.path.join(ngram_dir, "model.arpa"))
    total, count = 0.0, 0
    for line in corpus.file_split(text_file).iter_lines():
        words = [vocab.words[i] for i in vocab.ids(corpus.tokenize(line))]
        if words:
            scores = [s[0] for s in model.full_scores(" ".join(words))]
            total, count = total + sum(scores), count + len(scores)
    return 10 ** (-total / count)


def test_kenlm_reads_the_arpa_export_with_the_same_perplexity(kn3, corpus_flags):
    out, printed, _ = kn3
    assert kenlm_perplexity(out, corpus_flags[1]["test"]) == pytest.approx(printed["test_perplexity"], rel=1e-4)


def test_arpa_written_in_chunks_is_the_same_file(kn3, tmp_path):
    # The binary's ARPA file (one chunk per order here; KenLM reads it above) against the same model written a
    # few n-grams at a time, so every chunk boundary falls inside an order.
    from nplm_tf.baselines import arpa, build
    from pipelines import vocabulary

    out, _, _ = kn3
    model = build.load(out)
    vocab = vocabulary.Vocabulary.load(os.path.join(out, "vocab.tsv"))
    whole = open(os.path.join(out, "model.arpa"), encoding="utf-8").read()
    assert all(model.orders[k].keys.size < arpa.ROWS_PER_CHUNK for k in range(1, model.order + 1))
    for rows in (1, 2, 7):
        path = arpa.write_arpa(model, vocab, str(tmp_path / f"chunks_{rows}.arpa"), rows_per_chunk=rows)
        assert open(path, encoding="utf-8").read() == whole, rows
    with pytest.raises(ValueError, match="rows_per_chunk=0 must be positive"):
        arpa.write_arpa(model, vocab, str(tmp_path / "none.arpa"), rows_per_chunk=0)
    assert not os.path.exists(tmp_path / "none.arpa")


def test_arpa_lines_are_the_models_ngrams_spelled_and_formatted_one_at_a_time(kn3):
    """The vectorized writer against the plainest one: each n-gram in id order, its words spelled by following
    its context links one at a time, then log10 p to `arpa.DIGITS` digits (-99 where p = 0: <s>) and, below the top order,
    log10 of its back-off weight."""
    import numpy as np

    from nplm_tf.baselines import arpa, build
    from pipelines import vocabulary

    out, _, _ = kn3
    model = build.load(out)
    words = list(vocabulary.Vocabulary.load(os.path.join(out, "vocab.tsv")).words) + ["<s>"]
    expected = []
    for k in range(1, model.order + 1):
        o = model.orders[k]
        expected.append(f"\\{k}-grams:")
        for i in range(o.keys.size):
            spelled, context = [words[o.word[i]]], o.context[i]
            for j in range(k - 1, 0, -1):
                spelled.insert(0, words[model.orders[j].word[context]])
                context = model.orders[j].context[context]
            logp = np.log10(o.prob[i]) if o.prob[i] > 0 else -99.0
            backoff = f"\t{np.log10(o.backoff[i]):.{arpa.DIGITS}g}" if k < model.order else ""
            expected.append(f"{logp:.{arpa.DIGITS}g}\t{' '.join(spelled)}{backoff}")
        expected.append("")
    lines = open(os.path.join(out, "model.arpa"), encoding="utf-8").read().split("\n")
    start = lines.index("\\1-grams:")
    assert lines[start:] == expected + ["\\end\\", ""]


def test_order_the_data_cannot_support_falls_back_and_says_so(corpus_flags, tmp_path):
    small = helpers.write_lines(str(tmp_path / "small.txt"), ["a b c d e f", "a b c d e g"])
    result = helpers.run_binary(
        "nplm_tf.ngram",
        "--order=5",
        f"--output={tmp_path / 'o'}",
        "--min_count=1",
        "--corpus=files",
        f"--train_files={small}",
        f"--valid_files={small}",
        f"--test_files={small}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "like lmplz --discount_fallback" in result.stdout
    assert json.load(open(tmp_path / "o" / "metrics.json"))["warnings"]


@pytest.fixture(scope="module")
def network(corpus_flags, tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("nn") / "m")
    result = helpers.run_binary(
        "nplm_tf.train",
        f"--model_dir={model_dir}",
        "--epochs=2",
        "--noexport",
        *helpers.TINY_FLAGS,
        *corpus_flags[0],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir


def test_evaluate_mixes_with_the_ngram_and_saves_the_weights(network, kn3, corpus_flags):
    args = [f"--model_dir={network}", f"--ngram_dir={kn3[0]}", "--save_mixture", *corpus_flags[0]]
    result = helpers.run_binary("nplm_tf.evaluate", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    mix = out["mixture"]
    assert mix["network_perplexity"] == pytest.approx(out["perplexity"], rel=1e-9)
    assert mix["ngram_perplexity"] == pytest.approx(kn3[1]["test_perplexity"], rel=1e-9)
    for key in ("fixed_0.5", "em", "context_frequency"):
        assert math.isfinite(mix[key]["perplexity"])
    assert 0 <= mix["em"]["weight"] <= 1
    saved = json.load(open(os.path.join(network, "mixture.json")))
    assert saved["em"] == mix["em"]["weight"] and len(saved["context_frequency"]) == 8


def test_mismatched_vocabulary_is_refused(network, corpus_flags, tmp_path):
    out = str(tmp_path / "kn")
    assert (
        helpers.run_binary(
            "nplm_tf.ngram", "--order=2", f"--output={out}", "--min_count=100", *corpus_flags[0]
        ).returncode
        == 0
    )
    # Refused before TensorFlow loads and the split is scored (once only after scoring valid and test).
    per_token = tmp_path / "tokens.tsv"
    flags = [f"--model_dir={network}", f"--ngram_dir={out}", f"--per_token={per_token}", *corpus_flags[0]]
    result = helpers.run_binary("nplm_tf.evaluate", *flags, env=helpers.without_tensorflow(tmp_path))
    helpers.assert_one_sentence(result, f"the n-gram model in {out} has another vocabulary")
    assert not per_token.exists()
    empty = helpers.write_lines(str(tmp_path / "empty.txt"), [""])  # so is an empty file to score
    flags = [f"--model_dir={network}", f"--files={empty}"]
    result = helpers.run_binary("nplm_tf.evaluate", *flags, env=helpers.without_tensorflow(tmp_path))
    helpers.assert_one_sentence(result, "empty.txt is empty")


def test_interpolated_trigram_binary_and_mixture(network, corpus_flags, tmp_path):
    out = str(tmp_path / "it")
    result = helpers.run_binary(
        "nplm_tf.ngram", "--order=3", "--smoothing=interpolated", f"--output={out}", "--min_count=1", *corpus_flags[0]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["model"] == "interpolated_trigram" and len(metrics["lambdas"]) == 8
    mixed = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={network}", f"--ngram_dir={out}", *corpus_flags[0])
    assert mixed.returncode == 0, mixed.stderr[-3000:]
    report = json.loads(mixed.stdout.strip().splitlines()[-1])["mixture"]
    assert report["ngram_perplexity"] == pytest.approx(metrics["test_perplexity"], rel=1e-9)


def test_a_pruned_ngram_is_smaller_and_kenlm_reads_its_arpa_alike(kn3, corpus_flags, tmp_path):
    """`--prune=0,0,4`: the trigrams seen at most 4 times leave the model, its ARPA file says the same
    probabilities to KenLM as `ngram` computes, and valid and test are still scored (every distribution sums
    to one: tests/kneser_ney_test.py)."""
    out = tmp_path / "pruned"
    result = helpers.run_binary(
        "nplm_tf.ngram", "--order=3", f"--output={out}", "--min_count=1", "--prune=0,0,4", *corpus_flags[0]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    pruned, full = (json.load(open(os.path.join(d, "metrics.json"))) for d in (out, kn3[0]))
    assert (pruned["prune"], full["prune"]) == ([0, 0, 4], [0, 0, 0])
    assert [pruned["ngrams"][k] == full["ngrams"][k] for k in ("1", "2", "3")] == [True, True, False]
    assert pruned["ngrams"]["3"] < full["ngrams"]["3"]
    assert f"pruned to {pruned['ngrams']['2'] + pruned['ngrams']['3']:,} of" in result.stderr
    assert pruned["test_perplexity"] != full["test_perplexity"]
    assert kenlm_perplexity(out, corpus_flags[1]["test"]) == pytest.approx(pruned["test_perplexity"], rel=1e-4)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--prune=1"], "prune=1: unigrams are never pruned, so the first threshold must be 0."),
        (["--prune=0,2,1"], "prune=0,2,1: the thresholds must not decrease from one order to the next."),
        (["--prune=0,one"], "prune=0,one must be whole counts, one per order from 1, such as 0,0,1."),
        (["--prune=0,0,1,1"], "prune=0,0,1,1 gives 4 thresholds for a 3-gram; give at most 3."),
        (
            ["--prune=0,1", "--smoothing=interpolated"],
            "only the Kneser-Ney model is pruned; leave --prune out with --smoothing=interpolated.",
        ),
        (["--prune=0,0,1000000"], "prune=0,0,1000000 leaves no n-gram of order 3 (none was seen more than"),
    ],
)
def test_bad_pruning_flags_are_one_sentence_before_anything_is_written(flags, message, corpus_flags, tmp_path):
    out = tmp_path / "never"
    result = helpers.run_binary("nplm_tf.ngram", "--order=3", f"--output={out}", *flags, *corpus_flags[0])
    helpers.assert_one_sentence(result, message)
    assert not out.exists()


def test_an_order_longer_than_the_lines_is_one_sentence_before_anything_is_written(tmp_path):
    words = [f"w{i % 7}" for i in range(60)]
    split = helpers.write_lines(str(tmp_path / "one_word_lines.txt"), words)  # <s> w </s>: orders 1-3 only
    out = tmp_path / "never"
    flags = ["--corpus=files", f"--train_files={split}", f"--valid_files={split}", f"--test_files={split}"]
    result = helpers.run_binary("nplm_tf.ngram", "--order=5", f"--output={out}", "--min_count=1", *flags)
    helpers.assert_one_sentence(
        result, "no train line is long enough for an n-gram of order 4 (2 words between <s> and </s>); use an order "
    )
    assert not out.exists()
    assert helpers.run_binary("nplm_tf.ngram", "--order=3", f"--output={out}", "--min_count=1", *flags).returncode == 0
