"""The nplm toolkit's model file: written by `export --format=nplm`, read by `evaluate --nplm_model`.

nplm's own tools are the reference where they are at hand: with NPLM_BIN naming a folder that holds nplm's
`prepareNeuralLM`, `testNeuralNetwork` and `testNeuralLM` (github.com/moses-smt/nplm, built from its src/),
both of nplm's evaluation routes are run on the export. Without them, nplm's numbering is followed as its
sources describe it (`vocabulary.h`, `prepareNeuralLM.cpp`)."""

import json
import math
import os
import subprocess

import numpy as np
import pytest

from tests import helpers


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("nplm")
    paths = helpers.tiny_corpus_files(root, train=150, valid=20, test=20)
    with open(paths["test"], "a", encoding="utf-8") as f:  # words train never saw: <unk> to every route
        f.write("the zebra sees a quux .\nzebra zebra\n")
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
    wide = abs(stats["mean"]) > 0.5 or stats["sd"] > 0.5  # a full softmax's: Moses's raw scores are off
    assert ("warning: ln Z is far from 0 here" in trained["stderr"]) == wide


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


def test_text_numbered_as_nplms_prepare_tool_numbers_it_gets_evaluates_probabilities(trained):
    """nplm's documented evaluation route, followed from its sources: `prepareNeuralLM --words_file` (the file's
    input words) numbers text by a vocabulary that holds `<unk>` at id 0 before it reads the words file, pads
    with `<s>` and ends with `</s>`; `testNeuralNetwork` reads those ids as rows of the model's input embeddings
    and output layer. Every token, `</s>` and unknown words included, gets evaluate's ln P."""
    config, inputs, outputs, m = read_nplm(trained["file"])
    n = int(config["ngram_size"])
    ids = {"<unk>": 0}
    for word in inputs:
        ids.setdefault(word, len(ids))
    expected = [float(line.split("\t")[1]) for line in open(trained["per_token"], encoding="utf-8")]
    got = []
    for line in open(trained["paths"]["test"], encoding="utf-8"):
        numbered = [ids["<s>"]] * (n - 1) + [ids.get(w, 0) for w in line.split()] + [ids["</s>"]]
        for i in range(n - 1, len(numbered)):
            x = np.concatenate([m["input_embeddings"][c] for c in numbered[i - n + 1 : i]])
            y = m["output_weights"] @ np.tanh(m["hidden_weights 1"] @ x + m["hidden_biases 1"][:, 0])
            y += m["output_biases"][:, 0]
            got.append(y[numbered[i]] - (np.log(np.exp(y - y.max()).sum()) + y.max()))
    assert sum(line.count("zebra") for line in open(trained["paths"]["test"], encoding="utf-8")) == 3
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_nplms_own_tools_score_the_export_as_evaluate(trained, tmp_path):
    """prepareNeuralLM → testNeuralNetwork (natural log) and testNeuralLM --normalization 1 (log10) on the
    export: each perplexity equals evaluate's within 0.1%."""
    folder = os.environ.get("NPLM_BIN")
    if not folder:
        pytest.skip("NPLM_BIN is not set: nplm's tools are not at hand (the test above follows their numbering)")
    run = lambda tool, *args: subprocess.run(  # noqa: E731
        [os.path.join(folder, tool), *args], capture_output=True, text=True, check=True, timeout=300
    )
    config, inputs, _, _ = read_nplm(trained["file"])
    words, ngrams = tmp_path / "words.txt", tmp_path / "test.ngrams"
    words.write_text("".join(w + "\n" for w in inputs), encoding="utf-8")
    test = trained["paths"]["test"]
    run("prepareNeuralLM", "--train_text", test, "--train_file", str(ngrams), "--ngram_size", config["ngram_size"],
        "--words_file", str(words), "--randomize", "0")  # fmt: skip
    tested = run("testNeuralNetwork", "--model_file", trained["file"], "--test_file", str(ngrams)).stderr
    ln_likelihood = float(tested.split("Test log-likelihood:")[1].split()[0])
    instances = int(tested.split("Number of test instances:")[1].split()[0])
    lm = run("testNeuralLM", "--model_file", trained["file"], "--test_file", test, "--numberize", "1",
             "--ngramize", "1", "--add_start_stop", "1", "--normalization", "1").stderr  # fmt: skip
    log10_likelihood = float(lm.split("Test log10-likelihood:")[1].split()[0])
    ln_p = [float(line.split("\t")[1]) for line in open(trained["per_token"], encoding="utf-8")]
    perplexity = math.exp(-sum(ln_p) / len(ln_p))
    assert instances == len(ln_p)
    assert math.exp(-ln_likelihood / instances) == pytest.approx(perplexity, rel=1e-3)
    assert 10 ** (-log10_likelihood / len(ln_p)) == pytest.approx(perplexity, rel=1e-3)


def write_reordered(source: str, path, order: list[str], extra_outputs: tuple[str, ...] = ()) -> None:
    """`source`'s model with its words in `order` (input and output alike; `extra_outputs`, input-only words
    given an output row nobody predicts, as nplm's own training gives `<s>` and `<null>`)."""
    config, inputs, outputs, m = read_nplm(source)
    outputs_in = [w for w in order if w in outputs or w in extra_outputs]
    rows_in = [inputs.index(w) for w in order]
    out_rows = [outputs.index(w) if w in outputs else -1 for w in outputs_in]
    U = np.array([m["output_weights"][r] if r >= 0 else 0 * m["output_weights"][0] for r in out_rows])
    b = np.array([[m["output_biases"][r, 0] if r >= 0 else -1e4] for r in out_rows])
    config |= {"input_vocab_size": str(len(order)), "output_vocab_size": str(len(outputs_in))}
    matrices = {"input_embeddings": m["input_embeddings"][rows_in], "output_weights": U, "output_biases": b}
    with open(path, "w", encoding="utf-8") as f:
        f.write("\\config\n" + "".join(f"{k} {v}\n" for k, v in config.items()) + "\n")
        f.write("\\input_vocab\n" + "".join(w + "\n" for w in order) + "\n")
        f.write("\\output_vocab\n" + "".join(w + "\n" for w in outputs_in) + "\n")
        for name in ("input_embeddings", "hidden_weights 1", "hidden_biases 1", "hidden_weights 2", "hidden_biases 2"):
            f.write(f"\\{name}\n")
            np.savetxt(f, matrices.get(name, m[name]), fmt="%.9g", delimiter="\t")
            f.write("\n")
        for name in ("output_weights", "output_biases"):
            f.write(f"\\{name}\n")
            np.savetxt(f, matrices[name], fmt="%.9g", delimiter="\t")
            f.write("\n")
        f.write("\\end\n")


def test_files_in_nplms_own_order_and_in_the_old_export_order_still_read(trained, tmp_path):
    """`evaluate --nplm_model` reads a model nplm itself trained (its vocabulary `<unk>`, `<s>`, `</s>`, `<null>`,
    then the words; `<s>` and `<null>` also output rows) and a file this project exported before its words
    were written in nplm's order (`</s>`, `<unk>`, ..., `<s>`, `<null>`): each scores as evaluate does."""
    _, inputs, _, _ = read_nplm(trained["file"])
    assert inputs[:2] == ["<unk>", "</s>"] and inputs[-2:] == ["<s>", "<null>"]
    words = [w for w in inputs if w not in ("<unk>", "<s>", "</s>", "<null>")]
    expected = [float(line.split("\t")[1]) for line in open(trained["per_token"], encoding="utf-8")]
    orders = {
        "nplm": (["<unk>", "<s>", "</s>", "<null>", *words], ("<s>", "<null>")),
        "old": (["</s>", "<unk>", *words, "<s>", "<null>"], ()),
    }
    for name, (order, extra) in orders.items():
        path, per_token = tmp_path / f"{name}.nplm", str(tmp_path / f"{name}.tsv")
        write_reordered(trained["file"], path, order, extra)
        result = helpers.run_binary(
            "nplm_tf.evaluate",
            f"--nplm_model={path}",
            f"--files={trained['paths']['test']}",
            f"--per_token={per_token}",
        )
        assert result.returncode == 0, result.stderr[-3000:]
        got = [float(line.split("\t")[1]) for line in open(per_token, encoding="utf-8")]
        np.testing.assert_allclose(got, expected, rtol=0, atol=2e-6, err_msg=name)
