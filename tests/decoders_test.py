"""`nplm_tf.interop.decoders.PyCTCDecodeLM`: pyctcdecode's beam search with the network as its language model."""

from __future__ import annotations

import numpy as np
import pyctcdecode  # the asr extra, which the README's test command installs
import pytest

import nplm_tf
from nplm_tf.baselines import build as ngram_lib
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError
from tests import helpers

LABELS = ["", " ", *"abcdefghijklmnopqrstuvwxyz", "'"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders")
    paths = helpers.tiny_corpus_files(root, train=200)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    trainer.train_and_evaluate(helpers.tiny_config(epochs=3), str(root / "m"), corpus, verbose=0, export=False)
    ngram_lib.train_ngram(3, str(root / "kn3"), corpus, min_count=1)
    return str(root / "m")


def emissions(spelled: list[dict[str, float]]) -> np.ndarray:
    """CTC log-probabilities, (frames, labels): each entry a frame's letters and their mass, a blank frame
    after each (most of the mass on the blank)."""
    frames = []
    for letters in spelled:
        row = np.full(len(LABELS), 1e-4)
        for letter, mass in letters.items():
            row[LABELS.index(letter)] = mass
        frames.append(row / row.sum())
        blank = np.full(len(LABELS), 1e-4)
        blank[0] = 1.0
        frames.append(blank / blank.sum())
    return np.log(np.array(frames))


def utterance(text: str, ambiguous: dict[int, dict[str, float]]) -> np.ndarray:
    return emissions([ambiguous.get(i, {c: 0.98}) for i, c in enumerate(text)])


def test_only_the_network_decodes_the_word_the_acoustics_leave_in_doubt(model_dir):
    # "the cat sees" whose vowel of "cat" sounds more like "o": the letters alone decode "cot".
    log_probs = utterance("the cat sees", {5: {"a": 0.4, "o": 0.58}})
    alphabet = pyctcdecode.Alphabet.build_alphabet(LABELS)
    plain = pyctcdecode.BeamSearchDecoderCTC(alphabet).decode(log_probs)
    assert plain == "the cot sees"
    lm = nplm_tf.decoders.PyCTCDecodeLM(nplm_tf.LanguageModel(model_dir), alpha=0.5, beta=1.0)
    decoded = pyctcdecode.BeamSearchDecoderCTC(alphabet, language_model=lm).decode(log_probs)
    assert decoded == "the cat sees"
    # A network that never saw the sentence's words ranks them as it ranks others: mixed with the n-gram too.
    mixed = nplm_tf.decoders.PyCTCDecodeLM(nplm_tf.LanguageModel(model_dir, ngram_dir=model_dir + "/../kn3"))
    assert pyctcdecode.BeamSearchDecoderCTC(alphabet, language_model=mixed).decode(log_probs) == "the cat sees"


def test_its_scores_are_pyctcdecodes_shallow_fusion(model_dir):
    model = nplm_tf.LanguageModel(model_dir)
    lm = nplm_tf.decoders.PyCTCDecodeLM(model, alpha=0.7, beta=2.0, unk_score_offset=-10.0)
    start = lm.get_start_state()
    score, state = lm.score(start, "the")
    out = nplm_tf.State()
    assert score == pytest.approx(0.7 * model.BaseScore(start, "the", out) * np.log(10) + 2.0)
    assert state == out
    last, _ = lm.score(state, "zebra", is_last_word=True)
    expected = model.BaseScore(state, "zebra", out) - 10.0 + model.BaseScore(out, "</s>", nplm_tf.State())
    assert last == pytest.approx(0.7 * expected * np.log(10) + 2.0)
    assert lm.score_partial_token("ca") == 0.0 and lm.score_partial_token("zq") == -10.0
    assert lm.score_partial_token("zqzqzqzqz") == pytest.approx(-10.0 * 9 / 6)
    assert lm.order == model.order
    lm.reset_params(alpha=0.1)
    assert lm.alpha == 0.1
    with pytest.raises(UserError, match="is not a parameter"):
        lm.reset_params(gamma=1.0)
    with pytest.raises(UserError, match="unigrams must be a collection of strings"):
        nplm_tf.decoders.PyCTCDecodeLM(model, unigrams=[1, 2])


def test_installing_pyctcdecode_left_numpy_2_and_tensorflow_importable():
    import subprocess
    import sys

    code = "import numpy, tensorflow, pyctcdecode; print(numpy.__version__.split('.')[0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and int(done.stdout.split()[-1]) >= 2, done.stderr[-2000:]


def test_the_ctc_benchmarks_spelling_and_channel():
    import random

    from benchmarks import asr_channel as ctc_decoding

    assert ctc_decoding.normalize("The jury 's `` Fulton '' said , it's 1961 .") == "the jury 's fulton said it's"
    assert ctc_decoding.sentences("a b . c d ? e") == [" a b", "c d", "e "]
    text = "the jury said it did find that"
    alphabet = pyctcdecode.Alphabet.build_alphabet(ctc_decoding.LABELS)
    clean = ctc_decoding.emissions(text, random.Random(0), noise=0.0, spread=0.3, frames=2)
    assert clean.shape == (3 * len(text), len(ctc_decoding.LABELS))
    assert pyctcdecode.BeamSearchDecoderCTC(alphabet).decode(clean) == text
    noisy = ctc_decoding.emissions(text * 20, random.Random(0), noise=0.25, spread=0.3, frames=2)
    best = np.asarray(ctc_decoding.LABELS)[noisy[::3].argmax(axis=1)]
    letters = [c for c in text * 20 if c != " "]
    wrong = sum(b != c for b, c in zip(best[[i for i, c in enumerate(text * 20) if c != " "]], letters))
    assert 0.15 < wrong / len(letters) < 0.3  # about --noise of the letters that have alike ones are heard wrong


def test_the_ctc_benchmarks_paired_wer_interval_tells_a_real_difference_from_noise():
    from benchmarks import asr_channel

    assert asr_channel.word_errors("the cat sat", "the bat sat down") == (2, 3)  # one substitution, one insertion
    words = [10] * 200
    same = asr_channel.paired_wer_difference([1] * 200, [1] * 200, words)
    assert same == {"difference": 0.0, "interval95": [0.0, 0.0]}
    better = asr_channel.paired_wer_difference([0, 1] * 100, [1, 1] * 100, words)  # one error fewer in half
    assert better["difference"] == pytest.approx(-0.05) and better["interval95"][1] < 0
    # Two errors moved between utterances of equal systems: a difference the interval holds 0 for.
    noise = asr_channel.paired_wer_difference([2, 0] * 100, [0, 2] * 100, words)
    assert noise["difference"] == 0.0 and noise["interval95"][0] < 0 < noise["interval95"][1]


def test_the_ctc_benchmark_names_a_weight_tuned_at_its_grids_largest_value():
    from benchmarks import asr_channel

    alphas, betas = [0.2, 0.5, 1.0], [0.0, 1.0, 2.0]
    assert asr_channel.grid_edges((0.5, 1.0), alphas, betas) == []
    assert asr_channel.grid_edges((0.2, 0.0), alphas, betas) == []  # α at its smallest: no LM is the limit
    assert asr_channel.grid_edges((1.0, 1.0), alphas, betas) == ["alpha"]
    assert asr_channel.grid_edges((1.0, 2.0), alphas, betas) == ["alpha", "beta"]
    assert asr_channel.grid_edges((1.0, 2.0), [1.0], [2.0]) == []  # a grid of one value was not searched
    assert asr_channel.grid_edges((0.5, 0.0), alphas, betas, signed_beta=True) == ["beta"]  # flashlight's β < 0
    assert asr_channel.grid_edges((0.5, 1.0), alphas, betas, signed_beta=True) == []


def test_the_ctc_benchmark_decodes_with_each_model_and_names_the_weights_tuned_at_a_grids_edge(model_dir, tmp_path):
    import json
    import os

    from benchmarks import asr_channel

    text_dir = tmp_path / "text"
    text_dir.mkdir()
    for split, seed in (("valid", 1), ("test", 2)):
        lines = [asr_channel.normalize(t) for t in helpers.synthetic_texts(seed, 12)]
        (text_dir / f"{split}.txt").write_text("".join(line + "\n" for line in lines))
    alphas, betas = [0.6, 0.5], [1.0, 0.0]  # equal WERs keep the first: a largest value
    result = helpers.run_binary(
        "benchmarks.ctc_decoding",
        f"--text_dir={text_dir}",
        f"--model_dir={model_dir}",
        f"--ngram_dir={os.path.join(os.path.dirname(model_dir), 'kn3')}",
        "--valid_utterances=3",
        "--test_utterances=4",
        f"--alphas={','.join(map(str, alphas))}",
        f"--betas={','.join(map(str, betas))}",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout[result.stdout.index("{") :])
    assert out["utterances"] == {"valid": 3, "test": 4}
    tuned = [k for k in out if k in ("kn5", "network", "network+kn5") or k.startswith("rescore_100best_")]
    assert len(tuned) == 6 and 0 <= out["none"]["wer"]
    assert set(out["paired"]) == {"network - kn5", "network+kn5 - network", "network+kn5 - kn5"}
    for name in tuned:
        row = out[name]
        assert row["at_grid_edge"] == asr_channel.grid_edges((row["alpha"], row["beta"]), alphas, betas), name
        assert (f"note: {name}'s " in result.stderr) == bool(row["at_grid_edge"]), name


def test_the_readmes_decoder_snippet_runs_as_written(model_dir, tmp_path):
    """The README's LanguageModel and pyctcdecode snippet, copied out of the README and run as it stands (its
    model path swapped for the tiny model's): it defines its labels and emissions, and decodes what they spell;
    the next words it ranks come most probable first."""
    import ast
    import os
    import subprocess
    import sys
    import textwrap

    text = open(os.path.join(helpers.ROOT, "README.md"), encoding="utf-8").read()
    start = text.index("    import numpy as np\n    import nplm_tf\n")
    code = textwrap.dedent(text[start : text.index("\n\n**", start)])  # to the next paragraph
    assert '"runs/net"' in code
    code = code.replace('"runs/net"', repr(model_dir))
    env = dict(os.environ, PYTHONPATH=helpers.ROOT)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    score, scored, decoded = result.stdout.splitlines()[-3:]
    first, best = scored.split(" ", 1)
    assert float(score) < float(first) < 0 and decoded == "the jury said"
    values = [value for _, value in ast.literal_eval(best)]
    assert len(values) == 3 and values == sorted(values, reverse=True) and values[0] < 0


def test_the_asr_extra_installs_kenlm_beside_pyctcdecodes_needs():
    """`pip install -e '.[asr]'` gives pyctcdecode its KenLM (without it pyctcdecode warns and no KenLM baseline
    can be decoded) and its own dependencies (it is installed with --no-deps)."""
    import ast
    import os

    tree = ast.parse(open(os.path.join(helpers.ROOT, "setup.py"), encoding="utf-8").read())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    extras = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "extras_require"))
    names = {requirement.split("=")[0].split(">")[0].split("<")[0] for requirement in extras["asr"]}
    assert {"kenlm", "pygtrie", "hypothesis"} <= names


def test_the_ctc_benchmark_decodes_with_flashlight_at_each_beam(model_dir, tmp_path):
    """--decoder=flashlight: a row per language model and beam (no LM, KN through flashlight's KenLM, the network,
    the mixture, a self-normalized network scored raw), each with its WER, real-time factor and tuned weights."""
    import json
    import os

    from benchmarks import asr_channel

    text_dir = tmp_path / "text"
    text_dir.mkdir()
    for split, seed in (("valid", 1), ("test", 2)):
        lines = [asr_channel.normalize(t) for t in helpers.synthetic_texts(seed, 12)]
        (text_dir / f"{split}.txt").write_text("".join(line + "\n" for line in lines))
    root = os.path.dirname(model_dir)
    paths = {name: os.path.join(root, f"{name}.txt") for name in ("train", "valid", "test")}
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    raw_dir = str(tmp_path / "selfnorm")
    trainer.train_and_evaluate(helpers.tiny_config(epochs=4, self_normalize=0.5), raw_dir, corpus, verbose=0)
    result = helpers.run_binary(
        "benchmarks.ctc_decoding",
        f"--text_dir={text_dir}",
        f"--model_dir={model_dir}",
        f"--ngram_dir={os.path.join(root, 'kn3')}",
        f"--raw_model_dir={raw_dir}",
        "--decoder=flashlight",
        "--beams=5,20",
        "--valid_utterances=3",
        "--test_utterances=4",
        "--alphas=0.5",
        "--betas=-1,0,1",
        "--rounds=2",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout[result.stdout.index("{") :])
    names = ("none", "kn5", "network", "network+kn5", "network_raw")
    assert {f"{n}@{b}" for n in names for b in (5, 20)} <= set(out) and out["frames_per_second"] == 50
    for name in names:
        row = out[f"{name}@20"]
        assert 0 <= row["wer"] and row["rtf"] > 0 and row["alpha"] == 0.5 and row["beta"] in (-1.0, 0.0, 1.0)
        assert (row["alpha"], row["beta"]) == (out[f"{name}@5"]["alpha"], out[f"{name}@5"]["beta"])  # tuned once
        assert len(row["rtf_rounds"]) == 2 and row["rtf"] == pytest.approx(np.median(row["rtf_rounds"]))
    assert out["kn5@20"]["wer"] <= out["none@20"]["wer"]  # the n-gram helps the letters it hears
