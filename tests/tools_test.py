"""The shell tools on a trained model: neighbours, the projector files, query, rescore, generate."""

import itertools
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from nplm_tf.engines import NUMPY
from nplm_tf.network import loading
from tests import helpers

ANIMALS = ["horse", "bird", "cow"]
VERBS = ["eating", "sleeping", "running", "sitting"]
FURNITURE = ["table", "chair", "lamp", "desk"]
ADJECTIVES = ["red", "old", "new", "green"]
TINY = [
    "--order=4",
    "--feature_dim=10",
    "--hidden_dim=24",
    "--min_count=2",
    "--batch_size=32",
    "--learning_rate=0.01",
    "--lr_decay=0",
    "--weight_decay=0",
    "--precision=float32",
    "--shuffle_buffer=64",
]


def sentences():
    """The generalization corpus (tests/generalization_test.py), with cat and dog sharing more than the others."""
    out = [f"the {a} {aux} {v} ." for a, aux, v in itertools.product(["dog", *ANIMALS], ["is", "was"], VERBS)]
    out += [f"the cat was {v} ." for v in VERBS]
    for pet, toy in itertools.product(["cat", "dog"], ["ball", "mouse", "stick"]):
        out += [f"the {pet} chased the {toy} .", f"my {pet} likes the {toy} .", f"a {pet} found a {toy} ."]
    out += [f"the {t} {aux} {a} ." for t, aux, a in itertools.product(FURNITURE, ["is", "was"], ADJECTIVES)]
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("tools")
    rare = [f"word{k} here ." for k in range(60)]  # each word{k} seen once: <unk> at --min_count=2, after <s>
    train = helpers.write_lines(str(root / "train.txt"), sentences() * 12 + rare)
    valid = helpers.write_lines(str(root / "valid.txt"), sentences()[::3])
    test = helpers.write_lines(str(root / "test.txt"), sentences()[1::4] + ["the zebra was eating ."])
    corpus = ["--corpus=files", f"--train_files={train}", f"--valid_files={valid}", f"--test_files={test}"]
    model_dir = str(root / "model")
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={model_dir}", "--epochs=25", "--patience=25", *TINY, *corpus
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ngram_dir = str(root / "kn3")
    ngram_tokens = str(root / "kn3_test.tsv")
    result = helpers.run_binary(
        "nplm_tf.ngram", "--order=3", f"--output={ngram_dir}", "--min_count=2", f"--per_token={ngram_tokens}", *corpus
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        "model": model_dir,
        "ngram": ngram_dir,
        "ngram_tokens": ngram_tokens,
        "corpus": corpus,
        "test": test,
        "valid": valid,
        "root": root,
    }


def run_with_input(module, text, *args, env=None):
    """The binary's run on `text` (str or bytes) as standard input, its output bytes."""
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    return helpers.run_binary(module, *args, env=env, input=data)


def test_the_nearest_word_of_cat_is_dog_and_random_features_fail_it(trained):
    result = helpers.run_binary("nplm_tf.neighbors", f"--model_dir={trained['model']}", "--words=cat,table", "--k=3")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = dict(line.split(":\t") for line in result.stdout.splitlines() if ":\t" in line)
    assert lines["cat"].split()[0] == "dog"

    import keras

    from nplm_tf.inference import embeddings
    from nplm_tf.network import heads
    from nplm_tf.network import model as model_lib

    config, vocab, _ = loading.load_trained(trained["model"])
    index = {w: i for i, w in enumerate(vocab.words)}
    chance = 0
    for seed in range(10):  # the same shapes, random features: dog is cat's nearest by chance (1 in |V| - 2 = 30)
        keras.utils.set_random_seed(seed)  # once the worker's global state, so ~3% of runs failed by chance
        untrained = model_lib.build_model(config, heads.make(config, vocab.size))
        chance += vocab.words[embeddings.nearest(embeddings.features(untrained), index["cat"], 1)[0][0]] == "dog"
    assert chance <= 2


def test_nearest_never_lists_the_word_itself_even_when_k_exceeds_the_vocabulary():
    import numpy as np

    from nplm_tf.inference import embeddings

    table = np.array([[1.0, 0.0], [0.9, 0.1], [-1.0, 0.0], [0.0, 1.0]], np.float32)
    for k in (1, 3, 10):
        ids = [i for i, _ in embeddings.nearest(table, 0, k)]
        assert 0 not in ids
        assert len(ids) == min(k, 3)
    assert [i for i, _ in embeddings.nearest(table, 0, 10)] == [1, 3, 2]


def test_training_writes_projector_files_that_load(trained):
    from google.protobuf import text_format
    from tensorboard.plugins import projector

    config, vocab, model = loading.load_trained(trained["model"])
    directory = os.path.join(trained["model"], "logs", "projector")
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(directory))
    table = reader.get_tensor("embedding/.ATTRIBUTES/VARIABLE_VALUE")
    assert table.shape == (vocab.size, config.feature_dim)
    np.testing.assert_allclose(table, model.get_layer("nplm").C.numpy()[: vocab.size])
    rows = open(os.path.join(directory, "metadata.tsv"), encoding="utf-8").read().splitlines()
    assert rows[0] == "word\tcount" and [r.split("\t")[0] for r in rows[1:]] == list(vocab.words)
    config_pb = text_format.Parse(
        open(os.path.join(directory, "projector_config.pbtxt")).read(), projector.ProjectorConfig()
    )
    assert config_pb.embeddings[0].tensor_name == "embedding/.ATTRIBUTES/VARIABLE_VALUE"
    assert config_pb.embeddings[0].metadata_path == "metadata.tsv"


def query(trained, text, *args):
    result = run_with_input("nplm_tf.query", text, f"--model_dir={trained['model']}", *args)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return result.stdout.decode("utf-8").splitlines()


def perplexity(lines) -> float:
    """query's "Perplexity including OOVs"."""
    return float(next(line for line in lines if line.startswith("Perplexity including OOVs:")).split("\t")[1])


def test_query_total_equals_evaluate(trained):
    text = open(trained["test"], encoding="utf-8").read()
    lines = query(trained, text)
    evaluated = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={trained['model']}", f"--files={trained['test']}")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert perplexity(lines) == pytest.approx(json.loads(evaluated.stdout.splitlines()[-1])["perplexity"], rel=1e-6)
    zebra = next(line for line in lines if "zebra=" in line)
    assert "zebra=1 " in zebra and zebra.endswith("OOV: 1")
    assert lines[-1] == f"Tokens:\t{sum(len(s.split()) + 1 for s in text.splitlines())}"


def test_a_blank_line_is_an_empty_sentence_as_in_the_savedmodels_score(trained):
    lines = query(trained, "the dog was sleeping .\n\n")
    fields = lines[1].split("\t")
    assert fields[0].startswith("</s>=0 1 ") and fields[1].endswith("OOV: 0")
    served = tf.saved_model.load(os.path.join(trained["model"], "export", "1"))
    log_prob = served.signatures["score"](text=tf.constant([""]))["log_prob"].numpy()[0]
    assert float(fields[0].split(" ")[-1]) == pytest.approx(log_prob / np.log(10), abs=1e-5)
    assert lines[-1] == "Tokens:\t7"


def test_query_ngram_only_equals_kenlm_on_the_arpa_export(trained):
    import kenlm

    text = "the dog was sleeping .\n\nthe cat is eating .\nthe table was red ."  # a blank line: </s> alone
    lines = query(trained, text, f"--ngram_dir={trained['ngram']}", "--ngram_only")
    model = kenlm.Model(os.path.join(trained["ngram"], "model.arpa"))
    for sentence, line in zip(text.splitlines(), lines):
        ours = [float(field.split(" ")[-1]) for field in line.split("\t")[:-1]]
        theirs = [score for score, _, _ in model.full_scores(sentence)]
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def generate_equals_the_signature(trained, export, seed, samples, top_k, *flags):
    """`nplm_tf.generate` (8 words after "the cat", temperature 1) prints the export's `generate` texts."""
    args = [f"--seed={seed}", f"--num_samples={samples}", "--max_tokens=8", f"--top_k={top_k}", *flags]
    result = helpers.run_binary("nplm_tf.generate", f"--model_dir={trained['model']}", "--prompt=the cat", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    out = tf.saved_model.load(export).signatures["generate"](
        prompt=tf.constant(["the cat"] * samples),
        max_tokens=tf.constant(8),
        temperature=tf.constant(1.0),
        top_k=tf.constant(top_k),
        seed=tf.constant(seed, tf.int64),
        allow_unk=tf.constant(False),
    )
    assert result.stdout.splitlines() == [t.decode() for t in out["text"].numpy()]


def test_generate_equals_the_signature_with_the_same_seed(trained):
    generate_equals_the_signature(trained, os.path.join(trained["model"], "export", "1"), 5, 3, 5)


def test_many_samples_are_generated_a_group_at_a_time_each_group_the_signatures_rows_for_its_seed(trained):
    """All rows were one batch, whose outputs grow without bound (2·10⁹ rows ended in a segmentation fault)."""
    from nplm_tf.serving import sampling  # not the binary: its flags would clash with other modules' in a worker

    rows = sampling.GENERATE_ROWS
    args = ["--prompt=the cat", "--seed=5", f"--num_samples={rows + 2}", "--max_tokens=8"]
    result = helpers.run_binary("nplm_tf.generate", f"--model_dir={trained['model']}", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    signature = tf.saved_model.load(os.path.join(trained["model"], "export", "1")).signatures["generate"]

    def texts(count, seed):
        out = signature(
            prompt=tf.constant(["the cat"] * count),
            max_tokens=tf.constant(8),
            temperature=tf.constant(1.0),
            top_k=tf.constant(0),
            seed=tf.constant(seed, tf.int64),
            allow_unk=tf.constant(False),
        )
        return [t.decode() for t in out["text"].numpy()]

    first, second = texts(rows, 5), texts(2, NUMPY.derived_seed(5, 1))
    assert result.stdout.splitlines() == first + second
    assert second != first[:2] and NUMPY.derived_seed(5, 1) not in (5, NUMPY.derived_seed(6, 1))


def test_query_and_generate_compute_in_the_precision_asked(trained, tmp_path):
    """--precision (the float32 run computed in bfloat16): query's perplexity is evaluate --precision's, not the
    run's own; generate takes the flag and draws the text of an export in the same precision (this tiny model
    draws the same text in either precision, so that part shows agreement, not the dtype)."""
    text = open(trained["test"], encoding="utf-8").read()
    bf16 = "--precision=mixed_bfloat16"
    asked = perplexity(query(trained, text, bf16))
    evaluated = helpers.run_binary(
        "nplm_tf.evaluate", f"--model_dir={trained['model']}", f"--files={trained['test']}", bf16
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert asked == pytest.approx(json.loads(evaluated.stdout.splitlines()[-1])["perplexity"], rel=1e-6)
    assert asked != pytest.approx(perplexity(query(trained, text)), rel=1e-6)
    exported = helpers.run_binary("nplm_tf.export", f"--model_dir={trained['model']}", f"--export_dir={tmp_path}", bf16)
    assert exported.returncode == 0, exported.stderr[-2000:]
    generate_equals_the_signature(trained, json.loads(exported.stdout.splitlines()[-1])["export"], 3, 16, 0, bf16)


def test_generation_never_samples_unk_unless_asked(trained):
    served = tf.saved_model.load(os.path.join(trained["model"], "export", "1"))
    args = dict(
        prompt=tf.constant([""] * 64),
        max_tokens=tf.constant(4),
        temperature=tf.constant(3.0),
        top_k=tf.constant(0),
        seed=tf.constant(1, tf.int64),
    )
    without = served.signatures["generate"](**args, allow_unk=tf.constant(False))["continuation"].numpy()
    with_unk = served.signatures["generate"](**args, allow_unk=tf.constant(True))["continuation"].numpy()
    assert not any(b"<unk>" in t for t in without) and any(b"<unk>" in t for t in with_unk)


def test_generate_in_numpy_is_greedy_as_the_signature_and_needs_no_tensorflow(trained, tmp_path):
    """`generate --numpy --temperature=0` prints the signature's greedy text, in a Python where importing
    TensorFlow fails; `--numpy` with `--precision` is one sentence."""
    args = [f"--model_dir={trained['model']}", "--prompt=the cat", "--max_tokens=8", "--temperature=0"]
    graph = helpers.run_binary("nplm_tf.generate", *args, "--num_samples=2")
    numpy = helpers.run_binary(
        "nplm_tf.generate", *args, "--num_samples=2", "--numpy", env=helpers.without_tensorflow(tmp_path)
    )
    assert graph.returncode == numpy.returncode == 0, numpy.stderr[-2000:]
    assert numpy.stdout == graph.stdout and len(numpy.stdout.split()) > 3
    refused = helpers.run_binary("nplm_tf.generate", *args, "--numpy", "--precision=float32")
    assert refused.returncode == 1 and "--numpy computes in float32; drop --precision" in refused.stderr


@pytest.mark.parametrize("temperature,top_k", [(1.0, 0), (2.0, 0), (0.5, 3)])
def test_generating_in_numpy_draws_the_next_word_as_the_settings_say(trained, temperature, top_k):
    """The first word after a prompt, over 2,000 seeds, comes in proportion to P^(1/temperature) over every word
    (or the k best), `<unk>` left out; the same seed gives the same text."""
    import nplm_tf
    from nplm_tf.interop import generation

    model = nplm_tf.LanguageModel(trained["model"])
    start, state = nplm_tf.State(), nplm_tf.State()
    model.BeginSentenceWrite(start)
    model.BaseScore(start, "the", state)
    p = 10 ** model.next_word_log10(state)
    p[1] = 0.0  # <unk>
    if top_k:
        p[np.argsort(-p, kind="stable")[top_k:]] = 0.0
    p = p ** (1 / temperature)
    draws = 2000
    first = [generation.generate(model, "the", 1, temperature, top_k, seed) for seed in range(draws)]
    ids = {w: i for i, w in enumerate(model.vocab.words)}
    frequency = np.bincount([ids[w or "</s>"] for w in first], minlength=model.vocab_size) / draws
    helpers.assert_drawn_in_proportion(frequency, p / p.sum(), draws, 5)
    texts = [generation.generate(model, "the", 6, temperature, top_k, seed) for seed in (4, 4, 5)]
    assert texts[0] == texts[1] and "<unk>" not in " ".join(texts)


def test_rescore_appends_querys_line_totals_and_reports_bad_lines(trained):
    hypotheses = ["the dog was sleeping .", "the cat is eating .", "the zebra was red ."]
    nbest = [f"{i // 2} ||| {h} ||| LM0= -1.5 TM0= -2 -3 ||| -4.25" for i, h in enumerate(hypotheses)]
    text = "\n".join([nbest[0], "not an n-best line", *nbest[1:]]) + "\n"
    result = run_with_input("nplm_tf.rescore", text, f"--model_dir={trained['model']}", "--feature_name=NNLM")
    assert result.returncode == 1
    stderr = result.stderr.decode()
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "line 2 is not an n-best line" in warnings[0]
    errors = helpers.error_lines(stderr)  # the run ends with one sentence that counts what was left out
    assert errors == ["error: 1 line(s) were not n-best lines and were left out; the others were rescored."]
    written = result.stdout.decode().splitlines()
    assert len(written) == 3
    totals = [line.split("Total: ")[1].split(" ")[0] for line in query(trained, "\n".join(hypotheses))[:3]]
    for line, original, total in zip(written, nbest, totals):
        fields = line.split(" ||| ")
        assert fields[2] == f"LM0= -1.5 TM0= -2 -3 NNLM= {total}"
        assert [fields[0], fields[1], fields[3]] == [original.split(" ||| ")[i] for i in (0, 1, 3)]


def test_rescore_scores_ten_thousand_lines_in_seconds(trained):
    hypotheses = [" ".join(s.split()[:-1]) for s in sentences()]
    text = "".join(f"{i} ||| {hypotheses[i % len(hypotheses)]} ||| LM0= -1 ||| -1\n" for i in range(10_000))
    result = run_with_input("nplm_tf.rescore", text, f"--model_dir={trained['model']}")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert len(result.stdout.decode().splitlines()) == 10_000


def test_evaluate_fits_the_mixture_on_the_models_own_corpus(trained, tmp_path):
    no_brown = {"NLTK_DATA": str(tmp_path), "HOME": str(tmp_path)}  # the default corpus cannot be found
    result = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={trained['model']}",
        f"--ngram_dir={trained['ngram']}",
        f"--files={trained['test']}",
        env=no_brown,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    remembered = json.loads(result.stdout.splitlines()[-1])["mixture"]
    explicit = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={trained['model']}",
        f"--ngram_dir={trained['ngram']}",
        f"--files={trained['test']}",
        *trained["corpus"],
    )
    assert remembered == json.loads(explicit.stdout.splitlines()[-1])["mixture"]
    assert json.load(open(os.path.join(trained["model"], "corpus.json")))["valid_files"] == trained["valid"]


def test_a_model_that_does_not_say_its_corpus_is_read_with_brown_and_that_is_said_once(trained, tmp_path):
    model_dir = shutil.copytree(trained["model"], tmp_path / "model")
    os.remove(model_dir / "corpus.json")  # a run from before runs kept it, or one trained on lines in Python
    # Brown's test scored and its valid used to fit the mixture: one reading, one warning
    result = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model_dir}", f"--ngram_dir={trained['ngram']}")
    assert result.returncode == 0, result.stderr[-2000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {model_dir} does not say which corpus it was trained on (it has no corpus.json); reading "
        "--corpus=brown, the default: give the corpus flags if that is not its corpus."
    ]
    assert json.loads(result.stdout.splitlines()[-1])["tokens"] == 161_126  # Brown's test
    given = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model_dir}", *trained["corpus"])
    assert given.returncode == 0 and "warning: " not in given.stderr, given.stderr[-2000:]


def test_bad_input_to_the_tools(trained, tmp_path):
    unknown = helpers.run_binary(  # an empty entry (a doubled comma) is no word
        "nplm_tf.neighbors", f"--model_dir={trained['model']}", "--words=cat,zzz,,dog"
    )
    assert unknown.returncode != 0
    assert "cat:\t" in unknown.stdout and "dog:\t" in unknown.stdout
    assert helpers.error_lines(unknown.stderr) == [
        "error: not in the model's vocabulary: zzz (the others are answered above)."
    ]

    empty = query(trained, "")
    assert empty[0] == "Perplexity including OOVs:\tundefined (no tokens)" and empty[-1] == "Tokens:\t0"

    bad = run_with_input("nplm_tf.query", b"the dog was eating .\nthe \xff cat\n", f"--model_dir={trained['model']}")
    assert bad.returncode != 0 and "Total:" in bad.stdout.decode()  # the line before the error is answered
    assert helpers.error_lines(bad.stderr.decode()) == ["error: standard input line 2 is not valid UTF-8 (byte 4)."]

    seed = helpers.run_binary("nplm_tf.generate", f"--model_dir={trained['model']}", f"--seed={2**64}")
    helpers.assert_one_sentence(seed, f"seed={2**64} must fit in 64 bits")  # was a ValueError traceback
    nan = helpers.run_binary("nplm_tf.generate", f"--model_dir={trained['model']}", "--temperature=nan")
    helpers.assert_one_sentence(
        nan, "temperature=nan must be a number (<= 0: greedy)."
    )  # printed <unk> <unk> ... unasked

    for module in ("nplm_tf.query", "nplm_tf.rescore", "nplm_tf.generate", "nplm_tf.neighbors"):
        extra = ["--words=cat"] if module == "nplm_tf.neighbors" else []
        result = run_with_input(module, "", f"--model_dir={tmp_path}", *extra)
        errors = helpers.error_lines(result.stderr.decode())
        assert result.returncode != 0 and len(errors) == 1 and "holds no trained model" in errors[0], module


CHECK_BEFORE_TENSORFLOW = """
import sys
from absl import flags
from nplm_tf.core.config import ConfigError
import {module} as tool
flags.FLAGS(["tool", *sys.argv[1:]])
try:
    tool.check()
except ConfigError as e:
    print("error:", e)
print("tensorflow loaded:", "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize(
    "module",
    ["nplm_tf.query", "nplm_tf.rescore", "nplm_tf.generate", "nplm_tf.neighbors", "nplm_tf.evaluate", "nplm_tf.export"],
)
def test_the_tools_say_a_model_directory_holds_no_model_before_tensorflow_loads(module, trained, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(os.path.join(trained["model"], "config.json"), partial / "config.json")  # no epoch finished yet
    extra = ["--words=cat"] if module == "nplm_tf.neighbors" else []
    for model_dir, message in [
        (tmp_path, "holds no trained model (no config.json); train one with nplm_tf.train."),
        (partial, "has no trained weights yet (best.weights.h5); train at least one epoch."),
    ]:
        result = subprocess.run(
            [sys.executable, "-c", CHECK_BEFORE_TENSORFLOW.format(module=module), f"--model_dir={model_dir}", *extra],
            cwd=helpers.ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.stdout.splitlines() == [f"error: {model_dir} {message}", "tensorflow loaded: False"], (
            module,
            result.stderr[-2000:],
        )


def test_standard_input_drops_a_byte_order_mark_at_its_start():
    import io

    from nplm_tf.tools import text_input

    stream = io.BytesIO("\ufeffthe cat\r\n\ufeffsat\n".encode())
    assert list(text_input.read_lines(stream)) == ["the cat", "\ufeffsat"]


def test_the_network_the_ngram_and_their_mixture_compared_token_by_token_on_test(trained, tmp_path):
    """`ngram --per_token` and `evaluate --per_token / --mixture_per_token` write the test split alike;
    `compare` pairs two of them."""
    model = str(shutil.copytree(trained["model"], tmp_path / "model"))  # the fitted mixture is saved in it
    network_tokens, mixed_tokens = str(tmp_path / "network.tsv"), str(tmp_path / "mixed.tsv")
    evaluated = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={model}",
        f"--per_token={network_tokens}",
        f"--ngram_dir={trained['ngram']}",
        f"--mixture_per_token={mixed_tokens}",
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    network = json.loads(evaluated.stdout.splitlines()[-1])
    ngram = json.load(open(os.path.join(trained["ngram"], "metrics.json")))

    def compare(baseline, candidate):
        result = helpers.run_binary(
            "nplm_tf.compare", f"--baseline={baseline}", f"--candidate={candidate}", "--samples=300"
        )
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads(result.stdout)

    compared = compare(trained["ngram_tokens"], network_tokens)
    units = len(open(trained["test"], encoding="utf-8").read().splitlines())
    assert (compared["tokens"], compared["units"]) == (network["tokens"], units)
    assert compared["baseline_perplexity"] == pytest.approx(ngram["test_perplexity"], rel=1e-5)
    assert compared["candidate_perplexity"] == pytest.approx(network["perplexity"], rel=1e-5)
    assert compared["ratio"] == pytest.approx(network["perplexity"] / ngram["test_perplexity"], rel=1e-5)
    low, high = compared["ratio_95"]
    assert low <= compared["ratio"] <= high
    mixed = compare(network_tokens, mixed_tokens)
    expected = network["mixture"]["context_frequency"]["perplexity"]
    assert mixed["candidate_perplexity"] == pytest.approx(expected, rel=1e-5)
    assert mixed["baseline_perplexity"] == pytest.approx(network["perplexity"], rel=1e-5)
    # `query`'s outputs on the same text compare alike, a unit per line; `query` counts a line's </s> as
    # evaluate does, so the perplexities are those `query` prints.
    text = open(trained["test"], encoding="utf-8").read()
    printed = {}
    for name, flags in (("network", []), ("ngram", [f"--ngram_dir={trained['ngram']}", "--ngram_only"])):
        result = run_with_input("nplm_tf.query", text, f"--model_dir={model}", *flags)
        assert result.returncode == 0, result.stderr[-2000:]
        (tmp_path / f"{name}_query.txt").write_bytes(result.stdout)
        last = result.stdout.decode().splitlines()
        printed[name] = float(next(line for line in last if line.startswith("Perplexity including")).split("\t")[1])
    by_query = compare(tmp_path / "ngram_query.txt", tmp_path / "network_query.txt")
    assert (by_query["tokens"], by_query["units"]) == (network["tokens"], units)
    assert by_query["baseline_perplexity"] == pytest.approx(printed["ngram"], rel=1e-5)
    assert by_query["candidate_perplexity"] == pytest.approx(printed["network"], rel=1e-5)
    assert by_query["ratio"] == pytest.approx(compared["ratio"], rel=1e-4)
    # Without --ngram_dir there is no mixture to write; one file named twice is refused: nothing is written.
    for flags, message in (
        ([f"--mixture_per_token={tmp_path / 'x.tsv'}"], "--mixture_per_token needs --ngram_dir"),
        (
            [
                f"--ngram_dir={trained['ngram']}",
                f"--per_token={tmp_path / 'x.tsv'}",
                f"--mixture_per_token={tmp_path / 'x.tsv'}",
            ],
            "--per_token and --mixture_per_token name the same file; give two.",
        ),
    ):
        helpers.assert_one_sentence(helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model}", *flags), message)
        assert not (tmp_path / "x.tsv").exists()


def test_the_word_picture_labels_the_asked_words_and_their_neighbours_and_no_label_overlaps(trained, tmp_path):
    from nplm_tf.core import run_dir
    from nplm_tf.inference import embeddings

    vocab = run_dir.RunDir(trained["model"]).load_vocab()
    table = embeddings.features_of(trained["model"])
    cat = vocab.words.index("cat")
    asked = {cat: [i for i, _ in embeddings.nearest(table, cat, 4)]}
    boxes = embeddings.plot(table, vocab, str(tmp_path / "words.png"), 20, asked)
    assert {cat, *asked[cat]} <= set(boxes)  # every asked word and neighbour is labelled
    background = [b for i, b in boxes.items() if i != cat and i not in asked[cat]]
    assert 0 < len(background) < len(vocab.words)  # the rest only where a label fits

    def overlap(a, b):
        return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])

    assert not any(overlap(a, b) for k, a in enumerate(background) for b in list(boxes.values())[:k])
    assert os.path.getsize(tmp_path / "words.png") > 10_000


def pipe_into_head(args, stdin=None):
    """`python -m ARGS < STDIN | head -1` as a shell runs it: (the binary's exit status, its stderr, what head
    printed)."""
    env = dict(os.environ, NLTK_DATA=helpers.SHARED_NLTK)
    with open(stdin or os.devnull, "rb") as source:
        producer = subprocess.Popen(
            [sys.executable, "-m", *args],
            stdin=source,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=helpers.ROOT,
            env=env,
        )
        head = subprocess.Popen(["head", "-1"], stdin=producer.stdout, stdout=subprocess.PIPE)
        producer.stdout.close()  # head alone holds the pipe: it goes away when head exits
        first = head.communicate(timeout=120)[0].decode()
        stderr = producer.communicate(timeout=120)[1].decode()
    return producer.returncode, stderr, first


def test_a_reader_that_goes_away_ends_the_binary_quietly(trained, tmp_path):
    text = helpers.write_lines(str(tmp_path / "lines.txt"), ["the dog was sleeping ."] * 20_000)
    code, stderr, first = pipe_into_head(["nplm_tf.query", f"--model_dir={trained['model']}", "--batch_lines=10"], text)
    assert first.startswith("the=") and code == 141 and stderr == "", stderr[-2000:]
    code, stderr, first = pipe_into_head(
        ["nplm_tf.generate", f"--model_dir={trained['model']}", "--num_samples=600", "--prompt=the cat"]
    )
    assert first.startswith("the cat") and code == 141 and "Traceback" not in stderr, stderr[-2000:]


def test_help_is_the_binarys_own_and_exits_zero_installed_or_not():
    installed = shutil.which("nplm-query", path=os.path.dirname(sys.executable))
    assert installed, "the README's install makes the nplm-* commands"
    for command in ([sys.executable, "-m", "nplm_tf.query"], [installed]):
        short = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=helpers.ROOT)
        assert short.returncode == 0 and short.stdout.startswith("Scores sentences from standard input"), short
        assert "--model_dir" in short.stdout and "--precision" in short.stdout and "--verbosity" not in short.stdout
        full = subprocess.run([*command, "--helpfull"], capture_output=True, text=True, cwd=helpers.ROOT)
        assert full.returncode == 0 and "--verbosity" in full.stdout, full
        assert full.stdout.index("--model_dir") < full.stdout.index("absl.") < full.stdout.index("--verbosity")


def test_unwritable_outputs_are_refused_before_any_work_naming_the_users_path(trained, tmp_path):
    result = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--model_dir={trained['model']}",
        "--per_token=/proc/tokens.tsv",
        env=helpers.without_tensorflow(tmp_path),  # refused before TensorFlow loads, so before any scoring
    )
    helpers.assert_one_sentence(result, "--per_token=/proc/tokens.tsv cannot be written")
    assert ".tmp-" not in result.stderr
    result = helpers.run_binary("nplm_tf.ngram", "--output=/proc/kn", *trained["corpus"])
    helpers.assert_one_sentence(result, "--output=/proc/kn cannot be written")


def test_reading_tools_never_change_the_model_directory_and_saving_the_mixture_is_asked_for(trained, tmp_path):
    model_dir = str(shutil.copytree(trained["model"], tmp_path / "model"))

    def listing():
        return {
            os.path.relpath(os.path.join(root, name), model_dir): os.path.getmtime(os.path.join(root, name))
            for root, _, names in os.walk(model_dir)
            for name in names
        }

    before = listing()
    ngram = f"--ngram_dir={trained['ngram']}"
    queried = run_with_input("nplm_tf.query", "the dog was sleeping .\n", f"--model_dir={model_dir}", ngram)
    assert queried.returncode == 0 and "nothing was saved" in queried.stderr.decode()
    nbest = "0 ||| the cat is eating . ||| LM0= -1 ||| -1\n"
    assert run_with_input("nplm_tf.rescore", nbest, f"--model_dir={model_dir}", ngram).returncode == 0
    evaluated = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model_dir}", ngram)
    assert evaluated.returncode == 0 and json.loads(evaluated.stdout.splitlines()[-1])["mixture"]
    assert "note: nothing was saved; --save_mixture keeps this fit" in evaluated.stderr
    assert listing() == before
    saved = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model_dir}", ngram, "--save_mixture")
    assert saved.returncode == 0 and "now serve the mixture" in saved.stderr, saved.stderr[-2000:]
    assert set(listing()) - set(before) == {"mixture.json"}
    # Every reading tool's default is then the saved mixture; --nomixture leaves it out.
    mixed = query(trained | {"model": model_dir}, "the dog was sleeping .")
    alone = query(trained | {"model": model_dir}, "the dog was sleeping .", "--nomixture")
    # (the saved fit is evaluate's, on TensorFlow's probabilities; query fits on NumPy's: the same to ~1e-8)
    assert perplexity(mixed) == pytest.approx(perplexity(query(trained, "the dog was sleeping .", ngram)), rel=1e-6)
    assert perplexity(alone) == pytest.approx(perplexity(query(trained, "the dog was sleeping .")), rel=1e-9)
    assert perplexity(mixed) != pytest.approx(perplexity(alone), rel=1e-6)


def test_evaluate_prints_a_table_when_asked_or_on_a_terminal_and_json_when_piped(trained):
    args = [f"--model_dir={trained['model']}", f"--ngram_dir={trained['ngram']}", f"--files={trained['test']}"]
    piped = helpers.run_binary("nplm_tf.evaluate", *args)
    summary = json.loads(piped.stdout.splitlines()[-1])
    table = helpers.run_binary("nplm_tf.evaluate", *args, "--format=table")
    assert table.returncode == 0, table.stderr[-2000:]
    rows = table.stdout.splitlines()
    assert rows[0].split() == ["model", "perplexity", "λ", "(network's", "weight)"]
    assert f"{summary['perplexity']:.2f}" in rows[1] and "λ per context frequency" in rows[5]
    assert f"{summary['mixture']['context_frequency']['perplexity']:.2f}" in rows[5]
    assert rows[-1] == f"{summary['tokens']:,} predicted tokens, OOV rate {summary['oov_rate']:.2%}"


def test_generate_equals_the_signature_in_the_default_precision_of_a_bfloat16_run(trained, tmp_path):
    """A run trained in mixed_bfloat16 (the default), generated and exported with no --precision: the binary
    runs the signature's traced graph, so the text is the same (eager ops were rewritten otherwise)."""
    model_dir = shutil.copytree(trained["model"], tmp_path / "bf16")
    config = json.load(open(model_dir / "config.json"))
    config["precision"] = "mixed_bfloat16"  # the same float32 weights, computed as a bfloat16 run computes them
    with open(model_dir / "config.json", "w") as f:
        json.dump(config, f)
    shutil.rmtree(model_dir / "export")
    exported = helpers.run_binary("nplm_tf.export", f"--model_dir={model_dir}")
    assert exported.returncode == 0, exported.stderr[-2000:]
    generate_equals_the_signature(trained | {"model": str(model_dir)}, str(model_dir / "export" / "1"), 11, 64, 0)


def test_the_score_signatures_outputs_have_the_documented_dtypes_shapes_and_meaning(trained):
    served = tf.saved_model.load(os.path.join(trained["model"], "export", "1"))
    out = served.signatures["score"](text=tf.constant(["the dog was sleeping .", "", "the zebra"]))
    expected = {  # docs/serving.md's table
        "token_log_probs": (tf.float64, [3, 6]),
        "mask": (tf.bool, [3, 6]),
        "lengths": (tf.int32, [3]),
        "log_prob": (tf.float64, [3]),
        "perplexity": (tf.float64, [3]),
        "oov": (tf.bool, [3, 6]),
        "tokens": (tf.string, [3, 6]),
    }
    assert {k: (v.dtype, v.shape.as_list()) for k, v in out.items()} == expected
    assert out["lengths"].numpy().tolist() == [6, 1, 3]  # the words and </s>; an empty text scores </s> alone
    assert [t.decode() for t in out["tokens"].numpy()[1]] == ["</s>", "", "", "", "", ""]
    assert [t.decode() for t in out["tokens"].numpy()[2][:3]] == ["the", "<unk>", "</s>"]
    assert out["oov"].numpy()[2].tolist() == [False, True, False, False, False, False]
    ln = out["token_log_probs"].numpy()
    assert (ln[~out["mask"].numpy()] == 0).all() and (ln[out["mask"].numpy()] < 0).all()
    np.testing.assert_allclose(out["log_prob"].numpy(), ln.sum(axis=1))
    np.testing.assert_allclose(out["perplexity"].numpy(), np.exp(-ln.sum(axis=1) / [6, 1, 3]))
    doc = open(os.path.join(helpers.ROOT, "docs", "serving.md"), encoding="utf-8").read()
    for name, (dtype, _) in expected.items():
        assert f"| `{name}` | {dtype.name} |" in doc


def test_an_ngram_directory_alone_is_queried_and_rescored_as_kenlm_scores_its_file(trained):
    """`query` and `rescore` take an n-gram directory alone, as --ngram_dir or as --model_dir: each token's
    log10 P and matched n-gram length, and each hypothesis's total, are the `kenlm` module's on model.arpa."""
    import kenlm

    lm = kenlm.Model(os.path.join(trained["ngram"], "model.arpa"))
    lines = ["the cat was eating .", "the zebra sat", "", "word3 here ."]
    text = "".join(line + "\n" for line in lines)
    for flag in ("--ngram_dir", "--model_dir"):
        result = run_with_input("nplm_tf.query", text, f"{flag}={trained['ngram']}")
        assert result.returncode == 0, result.stderr[-2000:]
        printed = result.stdout.decode().splitlines()
        for line, out in zip(lines, printed):
            fields = [f.split(" ") for f in out.split("\t")[:-1]]
            expected = list(lm.full_scores(line))
            np.testing.assert_allclose([float(f[2]) for f in fields], [e[0] for e in expected], atol=1e-5)
            assert [int(f[1]) for f in fields] == [e[1] for e in expected], (flag, line)
        assert printed[len(lines)].startswith("Perplexity including OOVs:")
    nbest = "".join(f"0 ||| {line} ||| LM0= -1 ||| -1\n" for line in lines)
    result = run_with_input("nplm_tf.rescore", nbest, f"--ngram_dir={trained['ngram']}")
    assert result.returncode == 0, result.stderr[-2000:]
    totals = [float(out.split("NPLM= ")[1].split(" ")[0]) for out in result.stdout.decode().splitlines()]
    np.testing.assert_allclose(totals, [lm.score(line) for line in lines], atol=1e-4)


@pytest.mark.parametrize(
    "module,flags,flag,given,needed",
    [
        ("nplm_tf.evaluate", ["--model_dir=M", "--ngram_dir=M"], "ngram_dir", "M", "ngram"),
        ("nplm_tf.evaluate", ["--model_dir=N"], "model_dir", "N", "model"),
        ("nplm_tf.evaluate", ["--model_dirs=M", "--ngram_dir=M"], "ngram_dir", "M", "ngram"),
        ("nplm_tf.query", ["--model_dir=M", "--ngram_dir=M"], "ngram_dir", "M", "ngram"),
        ("nplm_tf.query", ["--model_dir=E"], "model_dir", "E", "model or ngram"),
        ("nplm_tf.rescore", ["--ngram_dir=M"], "ngram_dir", "M", "ngram"),
        ("nplm_tf.generate", ["--model_dir=N"], "model_dir", "N", "model"),
        ("nplm_tf.export", ["--model_dir=N"], "model_dir", "N", "model"),
        ("nplm_tf.neighbors", ["--model_dir=N", "--words=cat"], "model_dir", "N", "model"),
    ],
)
def test_a_directory_of_another_kind_is_refused_by_its_flag_before_any_model_loads(
    module, flags, flag, given, needed, trained
):
    """Every flag that names a directory of one kind is checked for that kind first: the error names the flag,
    the kind given and the kind needed, and TensorFlow (or any model) has not loaded."""
    from nplm_tf.core import run_dir

    paths = {"M": trained["model"], "N": trained["ngram"], "E": os.path.join(trained["model"], "export", "1")}
    args = [
        f.replace("=M", f"={paths['M']}").replace("=N", f"={paths['N']}").replace("=E", f"={paths['E']}") for f in flags
    ]
    result = subprocess.run(
        [sys.executable, "-c", CHECK_BEFORE_TENSORFLOW.format(module=module), *args],
        cwd=helpers.ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    kinds = {"M": "model", "N": "ngram", "E": "export"}
    need = " or ".join(run_dir.KINDS[k] for k in needed.split(" or "))
    expected = f"error: --{flag}={paths[given]} is {run_dir.KINDS[kinds[given]]}; it needs {need}."
    assert result.stdout.splitlines() == [expected, "tensorflow loaded: False"], result.stderr[-2000:]


def test_train_refuses_a_network_as_its_tails_ngram_before_anything_is_written(trained, tmp_path):
    model_dir = tmp_path / "sl"
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={model_dir}", "--shortlist=5", f"--ngram_dir={trained['model']}", *TINY,
        *trained["corpus"],
    )  # fmt: skip
    helpers.assert_one_sentence(
        result,
        f"--ngram_dir={trained['model']} is a network's model directory (nplm_tf.train); it needs an n-gram "
        "directory (nplm_tf.ngram).",
    )
    assert not model_dir.exists() and "precision:" not in result.stdout


def test_a_mixed_query_fits_once_and_keeps_the_fit_in_the_users_cache_not_the_model(trained, tmp_path):
    """The first mixed query fits λ on valid and says so once, with its time and where the fit is kept; the next
    calls (query, rescore, another copy of the model) read it and print the same numbers without a note; a
    rebuilt n-gram (another digest) is fitted again; the model directory is never written."""
    model_dir = str(shutil.copytree(trained["model"], tmp_path / "model"))
    before = sorted(os.listdir(model_dir))
    ngram = f"--ngram_dir={trained['ngram']}"
    text = "the dog was sleeping .\nthe cat\n"
    first = run_with_input("nplm_tf.query", text, f"--model_dir={model_dir}", ngram)
    stderr = first.stderr.decode()
    assert first.returncode == 0 and "note: fitted the mixture with" in stderr and " s; nothing was saved" in stderr
    assert f"kept for the next call in {os.environ['NPLM_TF_CACHE']}" in stderr
    again = run_with_input("nplm_tf.query", text, f"--model_dir={trained['model']}", ngram)  # the same contents
    assert again.returncode == 0 and "note:" not in again.stderr.decode() and again.stdout == first.stdout
    nbest = "0 ||| the cat ||| LM0= -1 ||| -1\n"
    rescored = run_with_input("nplm_tf.rescore", nbest, f"--model_dir={model_dir}", ngram)
    assert rescored.returncode == 0 and "note:" not in rescored.stderr.decode()
    assert sorted(os.listdir(model_dir)) == before
    bigram = str(tmp_path / "kn2")
    built = helpers.run_binary("nplm_tf.ngram", "--order=2", f"--output={bigram}", "--min_count=2", *trained["corpus"])
    assert built.returncode == 0, built.stderr[-2000:]
    refit = run_with_input("nplm_tf.query", text, f"--model_dir={model_dir}", f"--ngram_dir={bigram}")
    assert "note: fitted the mixture with" in refit.stderr.decode()


def test_neighbors_says_which_projector_files_it_writes_over(trained, tmp_path):
    model_dir = str(shutil.copytree(trained["model"], tmp_path / "model"))
    result = helpers.run_binary("nplm_tf.neighbors", f"--model_dir={model_dir}", "--projector")
    assert result.returncode == 0, result.stderr[-2000:]
    directory = os.path.join(model_dir, "logs", "projector")
    assert f"wrote {directory} (over the files training wrote there" in result.stdout
