"""The word error rate a language model buys a CTC speech decoder: no LM, KN5, the network, their mixture.

    # 1. the corpus in an ASR spelling, and models trained on it
    python -m benchmarks.ctc_decoding --prepare=runs/asr_text
    python -m nplm_tf.train --model_dir=runs/asr_mlp9 --corpus=files --train_files=runs/asr_text/train.txt \\
        --valid_files=runs/asr_text/valid.txt --test_files=runs/asr_text/test.txt
    python -m nplm_tf.ngram --order=5 --output=runs/asr_kn5 --corpus=files --train_files=runs/asr_text/train.txt \\
        --valid_files=runs/asr_text/valid.txt --test_files=runs/asr_text/test.txt
    # 2. decode
    python -m benchmarks.ctc_decoding --text_dir=runs/asr_text --model_dir=runs/asr_mlp9 --ngram_dir=runs/asr_kn5

The ASR spelling (`normalize`): lower case, letters and the apostrophe, one space between words; Brown's
punctuation tokens dropped. The train split is one line per Brown text; valid and test are cut into
sentences (at `.`, `?`, `!`), of which those of 5-30 words are the utterances.

The noisy channel (`emissions`, seeded): each character becomes --frames frames of posteriors followed by
a blank frame. With probability --noise a character is confused: its frames put the larger mass on a
letter that sounds alike (`CONFUSABLE`), the true one second; otherwise the true letter gets
1 − --spread and its alike letters share the rest. Every other label gets a floor of 1e-4. The space is
a label of its own (never confused), as in character CTC models.

Decoded with pyctcdecode's beam search (beam 100): no language model; KN5 through pyctcdecode's own
`LanguageModel` on the `kenlm` module reading KN5's ARPA; the network and the network + KN5 mixture through
`nplm_tf.interop.decoders.PyCTCDecodeLM`. α and β are chosen per model on --valid_utterances valid utterances over
a small grid (a weight chosen at its grid's largest value is named in `at_grid_edge`, with a note on
stderr), then the test utterances are decoded once. Also: the no-LM decode's 100 best (its
`decode_beams`) rescored by acoustic score + α·ln P + β·words with each model (an unknown word's log10 P
offset by −10, as in the shallow fusion). WER by jiwer; seconds per
utterance of each decode; the WER differences network − KN5 and mixture − each, with their 95% intervals by
the paired bootstrap over test utterances (`asr_channel.paired_wer_difference`). Prints one JSON object.

--decoder=flashlight decodes with flashlight-text's `LexiconDecoder` instead (torchaudio's `ctc_decoder`; the
lexicon is the model's vocabulary spelled in the labels), at each beam of --beams: no language model
(flashlight's `ZeroLM`), KN5 through flashlight's own KenLM on KN5's ARPA, the network exact, the network + KN5
mixture, and with --raw_model_dir a self-normalized network scored by its raw outputs (`normalized=False`).
`lm_weight` and `word_score` are tuned on the valid utterances over the α and β grids at the first beam (β may be
negative: flashlight's LM scores are log10 and its word_score a bonus a word). Columns: WER and the
real-time factor, decoding seconds over the audio's (--frames_per_second frames of the channel a second), the
median of --rounds decodes of the test utterances in which the models take turns.
Target (issue 95): the raw network at beam 500 within 2× KN5's time, its WER within 0.1 point of the exact one's.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import sys
import time

from absl import flags

from benchmarks.asr_channel import (
    LABELS,
    emissions,
    grid_edges,
    normalize,
    paired_wer_difference,
    sentences,
    word_errors,
)
from pipelines import app
from pipelines.errors import UserError

PREPARE = app.define_path("prepare", None, "Write the corpus in the ASR spelling to this directory, then stop.")
TEXT_DIR = app.define_path("text_dir", None, "The directory --prepare wrote.")
MODEL_DIR = app.define_path("model_dir", None, "A network trained on TEXT_DIR's train.txt.")
NGRAM_DIR = app.define_path("ngram_dir", None, "A Kneser-Ney n-gram built on the same text (its model.arpa).")
NOISE = flags.DEFINE_float("noise", 0.1, "Share of characters whose frames favour an alike letter.")
SPREAD = flags.DEFINE_float("spread", 0.3, "Posterior mass an unconfused character leaves to its alike letters.")
FRAMES = flags.DEFINE_integer("frames", 2, "Frames per character (a blank frame follows them).")
SEED = flags.DEFINE_integer("seed", 0, "Seed of the channel and of the utterances drawn.")
VALID_UTTERANCES = flags.DEFINE_integer("valid_utterances", 200, "Valid utterances that choose α and β.")
TEST_UTTERANCES = flags.DEFINE_integer("test_utterances", 1000, "Test utterances decoded.")
ALPHAS = flags.DEFINE_list("alphas", ["0.2", "0.3", "0.4", "0.5", "0.7"], "The grid of α.")
BETAS = flags.DEFINE_list("betas", ["0", "1"], "The grid of β.")
DECODER = flags.DEFINE_enum("decoder", "pyctcdecode", ["pyctcdecode", "flashlight"], "The beam search decoder.")
BEAMS = flags.DEFINE_list("beams", ["50", "500"], "With --decoder=flashlight: the beam sizes decoded.")
RAW_MODEL_DIR = app.define_path(
    "raw_model_dir", None, "With --decoder=flashlight: also a self-normalized network, scored by its raw outputs."
)
ROUNDS = flags.DEFINE_integer(
    "rounds", 1, "With --decoder=flashlight: test decodes of each model, taking turns; the RTF is their median."
)
FRAMES_PER_SECOND = flags.DEFINE_integer(
    "frames_per_second", 50, "The channel's frames a second of audio (20 ms, a CTC acoustic model's): the RTF's."
)


def prepare(directory: str) -> dict:
    from pipelines import corpus as corpus_lib
    from pipelines import files

    corpus = corpus_lib.brown_corpus()
    os.makedirs(directory, exist_ok=True)
    counts = {}
    for name in ("train", "valid", "test"):
        lines = list(corpus[name].iter_lines())
        if name != "train":
            lines = [s for line in lines for s in sentences(line)]
        kept = [t for t in map(normalize, lines) if t]
        files.write_text(os.path.join(directory, f"{name}.txt"), "".join(t + "\n" for t in kept))
        counts[name] = len(kept)
    return counts


def utterances(path: str, count: int, rng: random.Random) -> list[str]:
    with open(path, encoding="utf-8") as f:
        pool = [line.strip() for line in f if 5 <= len(line.split()) <= 30]
    if len(pool) < count:
        raise UserError(f"{path} has {len(pool)} utterances of 5-30 words, fewer than the {count} asked.")
    return rng.sample(pool, count)


def check() -> tuple[list[float], list[float]] | None:
    """The flags' errors before anything loads; the grids of α and β, parsed once for `main`."""
    if PREPARE.value:
        return None
    if not 0 <= NOISE.value < 1 or not 0 <= SPREAD.value < 1 or FRAMES.value < 1:
        raise UserError("--noise and --spread must be in [0, 1) and --frames at least 1.")
    if VALID_UTTERANCES.value < 1 or TEST_UTTERANCES.value < 1:
        raise UserError("--valid_utterances and --test_utterances must be at least 1.")
    grids = []
    for flag in (ALPHAS, BETAS):
        try:
            weights = [float(v) for v in flag.value]
        except ValueError:
            weights = []
        # flashlight's word_score is a bonus or, as its log10 LM scores usually want, a penalty.
        lowest = float("-inf") if flag is BETAS and DECODER.value == "flashlight" else 0.0
        if not weights or not all(lowest <= w < float("inf") for w in weights):
            least = "finite numbers" if lowest < 0 else "numbers of at least 0"
            raise UserError(f"--{flag.name} must be a comma-separated list of {least}, not {','.join(flag.value)!r}.")
        grids.append(weights)
    if DECODER.value == "flashlight":
        if not all(b.isdigit() and int(b) >= 1 for b in BEAMS.value) or not BEAMS.value:
            raise UserError(
                f"--beams must be a comma-separated list of whole numbers ≥ 1, not {','.join(BEAMS.value)!r}."
            )
        if ROUNDS.value < 1:
            raise UserError(f"--rounds={ROUNDS.value} must be at least 1.")
        if FRAMES_PER_SECOND.value < 1:
            raise UserError(f"--frames_per_second={FRAMES_PER_SECOND.value} must be at least 1.")
    elif RAW_MODEL_DIR.value:
        raise UserError("--raw_model_dir is for --decoder=flashlight.")
    for flag in (TEXT_DIR, MODEL_DIR, NGRAM_DIR):
        if not flag.value:
            raise UserError(f"--{flag.name} is required (or --prepare=DIR first).")
    if not os.path.isfile(os.path.join(NGRAM_DIR.value, "model.arpa")):
        raise UserError(f"{NGRAM_DIR.value} has no model.arpa; build it with nplm_tf.ngram (without --noarpa).")
    return grids[0], grids[1]


def flashlight_rows(inputs: dict, references: dict, grid: list) -> dict:
    """The flashlight decoder's rows: per beam of --beams, each language model's WER and real-time factor, its
    lm_weight and word_score tuned on valid over `grid`."""
    import jiwer
    from flashlight.lib.text.decoder import KenLM, ZeroLM

    import nplm_tf
    from nplm_tf.interop import flashlight_lm

    tokens = ["-" if label == "" else "|" if label == " " else label for label in LABELS]
    network = nplm_tf.LanguageModel(MODEL_DIR.value, mixture=False)
    mixed = nplm_tf.LanguageModel(MODEL_DIR.value, ngram_dir=NGRAM_DIR.value)
    words = flashlight_lm.word_dictionary(network)
    arpa = os.path.join(NGRAM_DIR.value, "model.arpa")
    # name -> (the model whose words make the lexicon, a fresh flashlight LM over it)
    models = {
        "none": (network, ZeroLM),
        "kn5": (network, lambda: KenLM(arpa, words)),
        "network": (network, lambda: flashlight_lm.FlashlightLM(network, words)),
        "network+kn5": (mixed, lambda: flashlight_lm.FlashlightLM(mixed, words)),
    }
    if RAW_MODEL_DIR.value:
        raw = nplm_tf.LanguageModel(RAW_MODEL_DIR.value, mixture=False, normalized=False)
        models["network_raw"] = (raw, lambda: flashlight_lm.FlashlightLM(raw, flashlight_lm.word_dictionary(raw)))
    audio = {split: sum(len(x) for x in inputs[split]) / FRAMES_PER_SECOND.value for split in inputs}

    def decode(name: str, beam: int, weights, split: str):
        model, make = models[name]
        decoder = flashlight_lm.lexicon_decoder(model, tokens, beam, weights[0], weights[1], lm=make())
        start = time.perf_counter()
        texts = [" ".join(decoder.decode(x)) for x in inputs[split]]
        return texts, (time.perf_counter() - start) / audio[split]

    rows, beams, tuned = {}, [int(b) for b in BEAMS.value], {}
    for name in models:
        # Tuned once, at the first beam (the wider beams' decodes cost too much to repeat over the grid).
        chosen = grid[:1] if name == "none" else grid
        tuned[name] = min(chosen, key=lambda ab: jiwer.wer(references["valid"], decode(name, beams[0], ab, "valid")[0]))
        print(json.dumps({name: tuned[name]}), file=sys.stderr, flush=True)
    for beam in beams:
        # The models take turns, round after round, so that the host's drift touches each alike.
        for _ in range(ROUNDS.value):
            for name in models:
                texts, rtf = decode(name, beam, tuned[name], "test")
                a, b = tuned[name]
                edges = [] if name == "none" else grid_edges((a, b), *zip(*grid), signed_beta=True)
                row = rows.setdefault(f"{name}@{beam}", {"rtf_rounds": []})
                row.update(wer=jiwer.wer(references["test"], texts), alpha=a, beta=b, at_grid_edge=edges)
                row["rtf_rounds"].append(rtf)
                row["rtf"] = statistics.median(row["rtf_rounds"])
        print(json.dumps({beam: {n: rows[f"{n}@{beam}"] for n in models}}), file=sys.stderr, flush=True)
    return rows


def main(argv, checked):
    if PREPARE.value:
        print(json.dumps({"prepared": PREPARE.value, "lines": prepare(PREPARE.value)}))
        return
    import jiwer
    import kenlm
    import numpy as np
    import pyctcdecode

    import nplm_tf
    from nplm_tf.interop.decoders import PyCTCDecodeLM

    rng = random.Random(SEED.value)
    valid = utterances(os.path.join(TEXT_DIR.value, "valid.txt"), VALID_UTTERANCES.value, rng)
    test = utterances(os.path.join(TEXT_DIR.value, "test.txt"), TEST_UTTERANCES.value, rng)
    channel = random.Random(SEED.value + 1)
    heard = lambda t: emissions(t, channel, NOISE.value, SPREAD.value, FRAMES.value)  # noqa: E731
    inputs = {"valid": [heard(t) for t in valid], "test": [heard(t) for t in test]}
    alphas, betas = checked
    grid = list(itertools.product(alphas, betas))
    references = {"valid": valid, "test": test}
    if DECODER.value == "flashlight":
        result = {"utterances": {"valid": len(valid), "test": len(test)}, "decoder": "flashlight"}
        result["frames_per_second"] = FRAMES_PER_SECOND.value
        print(json.dumps(result | flashlight_rows(inputs, references, grid), indent=2))
        return
    alphabet = pyctcdecode.Alphabet.build_alphabet(LABELS)
    network = nplm_tf.LanguageModel(MODEL_DIR.value, mixture=False)
    mixed = nplm_tf.LanguageModel(MODEL_DIR.value, ngram_dir=NGRAM_DIR.value)
    kn5 = kenlm.Model(os.path.join(NGRAM_DIR.value, "model.arpa"))
    unigrams = list(network.vocab.words[2:])
    makers = {
        "none": None,
        "kn5": lambda a, b: pyctcdecode.LanguageModel(kn5, unigrams, alpha=a, beta=b),
        "network": lambda a, b: PyCTCDecodeLM(network, unigrams, alpha=a, beta=b),
        "network+kn5": lambda a, b: PyCTCDecodeLM(mixed, unigrams, alpha=a, beta=b),
    }

    def tuned_row(name: str, tuned: tuple[float, float], row: dict) -> dict:
        edges = grid_edges(tuned, alphas, betas)
        if edges:
            print(
                f"note: {name}'s {' and '.join(edges)} ({tuned[0]:g}, {tuned[1]:g}) is its grid's largest; "
                "widen --alphas or --betas, or the comparison holds an under-tuned decoder.",
                file=sys.stderr,
            )
        return {**row, "alpha": tuned[0], "beta": tuned[1], "at_grid_edge": edges}

    def decode(lm, split):
        decoder = pyctcdecode.BeamSearchDecoderCTC(alphabet, language_model=lm)
        start = time.perf_counter()
        texts = [decoder.decode(x) for x in inputs[split]]
        return texts, (time.perf_counter() - start) / len(texts)

    result = {"utterances": {"valid": len(valid), "test": len(test)}, "noise": NOISE.value, "spread": SPREAD.value}
    errors = {}  # each decoder's errors per test utterance, for the paired intervals
    for name, make in makers.items():
        if make is None:
            texts, seconds = decode(None, "test")
            result[name] = {"wer": jiwer.wer(test, texts), "seconds_per_utterance": seconds}
        else:
            tuned = min(grid, key=lambda ab: jiwer.wer(valid, decode(make(*ab), "valid")[0]))
            texts, seconds = decode(make(*tuned), "test")
            result[name] = tuned_row(name, tuned, {"wer": jiwer.wer(test, texts), "seconds_per_utterance": seconds})
        errors[name] = [word_errors(r, h) for r, h in zip(test, texts, strict=True)]
    words = [n for _, n in errors["none"]]
    result["paired"] = {
        f"{a} - {b}": paired_wer_difference([e for e, _ in errors[a]], [e for e, _ in errors[b]], words)
        for a, b in (("network", "kn5"), ("network+kn5", "network"), ("network+kn5", "kn5"))
    }
    # The no-LM decode's 100 best, rescored.
    plain = pyctcdecode.BeamSearchDecoderCTC(alphabet)
    nbest = {split: [plain.decode_beams(x, beam_width=100) for x in inputs[split]] for split in ("valid", "test")}
    scorers = {"kn5": (kn5.score, kn5), "network": (network.score, network), "network+kn5": (mixed.score, mixed)}
    offset = -10.0  # pyctcdecode's unknown-word offset (log10), as in the shallow fusion above

    def rescored(score, model, text: str) -> float:
        """ln P of a whole hypothesis, each word outside the model offset as pyctcdecode offsets it (else the
        misheard non-words, all `<unk>`, would be cheap)."""
        unknown = sum(w not in model for w in text.split())
        return (score(text) + offset * unknown) * np.log(10)

    for name, (score, model) in scorers.items():
        lm_scores = {
            split: [[rescored(score, model, beam[0]) for beam in beams] for beams in nbest[split]]
            for split in ("valid", "test")
        }

        def pick(split, alpha, beta):
            chosen = []
            for beams, lm in zip(nbest[split], lm_scores[split]):
                totals = [b[3] + alpha * s + beta * len(b[0].split()) for b, s in zip(beams, lm)]
                chosen.append(beams[int(np.argmax(totals))][0])
            return chosen

        tuned = min(grid, key=lambda ab: jiwer.wer(references["valid"], pick("valid", *ab)))
        key = f"rescore_100best_{name}"
        result[key] = tuned_row(key, tuned, {"wer": jiwer.wer(test, pick("test", *tuned))})
    result["ratio_network_to_kn5_seconds"] = (
        result["network"]["seconds_per_utterance"] / result["kn5"]["seconds_per_utterance"]
    )
    print(json.dumps(result, indent=2))


def run():
    app.run(main, check, tensorflow=False)


if __name__ == "__main__":
    run()
