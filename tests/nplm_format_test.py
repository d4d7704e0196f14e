"""The nplm toolkit's model file: written by `export --format=nplm`, read by `evaluate --nplm_model`."""

import json

import numpy as np
import pytest

from tests import helpers


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("nplm")
    paths = helpers.tiny_corpus_files(root, train=150, valid=20, test=20)
    flags = helpers.files_flags(paths)
    model_dir = str(root / "m")
    result = helpers.run_binary("nplm_tf.train", f"--model_dir={model_dir}", "--epochs=2", *helpers.TINY_FLAGS, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    per_token = str(root / "tokens.tsv")
    result = helpers.run_binary(
        "nplm_tf.evaluate", f"--model_dir={model_dir}", f"--files={paths['test']}", f"--per_token={per_token}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    exported = str(root / "m.nplm")
    result = helpers.run_binary(
        "nplm_tf.export", f"--model_dir={model_dir}", "--format=nplm", f"--export_dir={exported}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        "model_dir": model_dir,
        "paths": paths,
        "flags": flags,
        "per_token": per_token,
        "file": exported,
        "printed": json.loads(result.stdout.strip().splitlines()[-1]),
        "stderr": result.stderr,
    }


def read_nplm(path):
    """A reader written from the format's description alone (sections ended by a blank line; matrices a row a
    line, tab-separated), not from the exporter's code."""
    sections, name, rows = {}, None, []
    for line in open(path, encoding="utf-8").read().split("\n"):
        if name is None:
            if line.startswith("\\") and line != "\\end":
                name, rows = line[1:], []
        elif line == "":
            sections[name], name = rows, None
        else:
            rows.append(line)
    config = dict(row.split(" ", 1) for row in sections["config"])
    matrix = {
        k: np.array([[float(x) for x in r.split("\t")] for r in v])
        for k, v in sections.items()
        if k not in ("config", "input_vocab", "output_vocab")
    }
    return config, sections["input_vocab"], sections["output_vocab"], matrix


def test_an_independent_reader_of_the_file_gives_evaluates_probabilities(trained):
    config, inputs, outputs, m = read_nplm(trained["file"])
    assert config["version"] == "1" and config["num_hidden"] == "0" and config["activation_function"] == "tanh"
    n = int(config["ngram_size"])
    assert (
        n == 3 and int(config["input_vocab_size"]) == len(inputs) and int(config["output_vocab_size"]) == len(outputs)
    )
    assert {"<s>", "<null>", "<unk>", "</s>"} <= set(inputs) and "<s>" not in outputs
    assert m["hidden_weights 2"].shape == (1, 1) and m["hidden_biases 2"].shape == (1, 1)
    index_in, index_out = {w: i for i, w in enumerate(inputs)}, {w: i for i, w in enumerate(outputs)}
    expected = [float(line.split("\t")[1]) for line in open(trained["per_token"], encoding="utf-8")]
    got = []
    for line in open(trained["paths"]["test"], encoding="utf-8"):
        words = line.split()
        if not words:
            continue
        padded = ["<s>"] * (n - 1) + words + ["</s>"]
        for i in range(n - 1, len(padded)):
            context = [index_in.get(w, index_in["<unk>"]) for w in padded[i - n + 1 : i]]  # oldest first
            x = np.concatenate([m["input_embeddings"][c] for c in context])
            h = np.tanh(m["hidden_weights 1"] @ x + m["hidden_biases 1"][:, 0])
            y = m["output_weights"] @ h + m["output_biases"][:, 0]
            ln_z = np.log(np.exp(y - y.max()).sum()) + y.max()
            got.append(y[index_out.get(padded[i], index_out["<unk>"])] - ln_z)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_evaluate_scores_an_nplm_file_as_the_model_it_came_from(trained, tmp_path):
    per_token = str(tmp_path / "nplm.tsv")
    result = helpers.run_binary(
        "nplm_tf.evaluate",
        f"--nplm_model={trained['file']}",
        f"--files={trained['paths']['test']}",
        f"--per_token={per_token}",
        "--format=json",
        env=helpers.without_tensorflow(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ours = [line.split("\t") for line in open(trained["per_token"], encoding="utf-8")]
    theirs = [line.split("\t") for line in open(per_token, encoding="utf-8")]
    assert [t[0] for t in theirs] == [t[0] for t in ours]
    np.testing.assert_allclose([float(t[1]) for t in theirs], [float(t[1]) for t in ours], rtol=0, atol=2e-6)
    summary = json.loads(result.stdout)
    assert summary["tokens"] == len(ours)
    assert summary["perplexity"] == pytest.approx(np.exp(-np.mean([float(t[1]) for t in ours])), rel=1e-5)


def test_the_export_says_how_near_the_network_is_to_self_normalized(trained):
    stats = trained["printed"]["ln_z"]
    assert stats["contexts"] > 0 and np.isfinite(stats["mean"]) and stats["sd"] >= 0
    assert f"mean {stats['mean']:.3f}" in trained["stderr"]


def test_what_the_format_cannot_hold_is_refused_and_no_file_is_overwritten(trained, tmp_path):
    direct = str(tmp_path / "direct")
    result = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={direct}", "--epochs=1", "--direct", *helpers.TINY_FLAGS, *trained["flags"]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    target = tmp_path / "d.nplm"
    result = helpers.run_binary("nplm_tf.export", f"--model_dir={direct}", "--format=nplm", f"--export_dir={target}")
    helpers.assert_one_sentence(
        result,
        f"{direct} cannot be written in the nplm format: it has direct connections (W), which the nplm "
        "format cannot hold; train it with --nodirect.",
    )
    assert not target.exists()
    before = open(trained["file"], encoding="utf-8").read()
    result = helpers.run_binary(
        "nplm_tf.export", f"--model_dir={trained['model_dir']}", "--format=nplm", f"--export_dir={trained['file']}"
    )
    helpers.assert_one_sentence(
        result, f"--export_dir={trained['file']} exists; the nplm model is a new file: give another name."
    )
    assert open(trained["file"], encoding="utf-8").read() == before


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda t: t.replace("activation_function tanh", "activation_function rectifier"),
            "has num_hidden 0 and activation rectifier; equation (1) is one tanh hidden layer",
        ),
        (lambda t: t.replace("num_hidden 0", "num_hidden 50"), "has num_hidden 50 and activation tanh"),
        (lambda t: t.replace("\\output_biases", "\\other"), "has no \\output_biases section"),
        (lambda t: "just text\n", "is not an nplm model file: it has no \\config section"),
    ],
)
def test_an_nplm_file_eq_1_does_not_cover_is_refused_in_one_sentence(change, message, trained, tmp_path):
    path = tmp_path / "changed.nplm"
    path.write_text(change(open(trained["file"], encoding="utf-8").read()), encoding="utf-8")
    result = helpers.run_binary("nplm_tf.evaluate", f"--nplm_model={path}", f"--files={trained['paths']['test']}")
    assert result.returncode == 1 and message in result.stderr, result.stderr[-2000:]
    assert len(helpers.error_lines(result.stderr)) == 1
