"""Writes a trained model as a self-contained SavedModel for TensorFlow Serving.

    python -m nplm_tf.export --model_dir=runs/mlp9 --export_dir=/models/nplm [--version=N]
    python -m nplm_tf.export --model_dir=runs/mlp9 --format=nplm --export_dir=mlp9.nplm   # for nplm and Moses
    python -m nplm_tf.export --ensemble=runs/ensemble.json --export_dir=/models/ensemble   # one SavedModel

Writes EXPORT_DIR/<version>/ (default: the next free version number) with the
signatures serving_default, next_word, score and generate; see README.md. If
the model directory holds a fitted n-gram mixture (mixture.json, written by
`nplm_tf.evaluate --ngram_dir`), the served probabilities are the mixture's.
An existing version is never overwritten. `--ensemble=FIT` exports an ensemble (`nplm_tf.evaluate
--model_dirs=… [--ngram_dir=…] --save_ensemble=FIT`) as one SavedModel with the same signatures: its
networks, n-grams and fitted weights, so that `score` is `evaluate --model_dirs`'s. The export computes in
float32 whatever precision trained the model, as `evaluate` and the NumPy path do: one model, one number.
`--precision=mixed_bfloat16` serves the same weights in bfloat16 instead (faster on a CPU with AMX); its
probabilities are then `nplm_tf.evaluate --precision=mixed_bfloat16`'s.

--format=nplm writes the network as one text file in the USC/ISI nplm toolkit's format, which its
testNeuralNetwork and the Moses decoder's `NeuralLM` feature read (`inference/nplm_format.py`): a network with
one tanh layer and a full softmax (no direct connections, no short list). Moses scores with the raw outputs,
unnormalized: an NCE-trained model, nearly self-normalized, suits it; the export prints ln Z's mean and
spread over validation contexts to show how near.
"""

import json
import os
import sys

from absl import flags

from nplm_tf import hardware, run_dir
from nplm_tf.config import ConfigError
from nplm_tf.inference import nplm_format
from nplm_tf.network import heads, loading
from nplm_tf.tools import ensemble, model_flags
from pipelines import app, files

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.")
ENSEMBLE = app.define_path(
    "ensemble",
    None,
    "Instead of --model_dir: an ensemble's fit (nplm_tf.evaluate --model_dirs --save_ensemble=FILE), exported as "
    "one SavedModel to --export_dir.",
)
EXPORT_DIR = app.define_path("export_dir", None, "Where to write <version>/saved_model.pb (default: MODEL_DIR/export).")
VERSION = flags.DEFINE_integer("version", None, "Version subdirectory (default: one above the largest present).")
MIXTURE = flags.DEFINE_boolean("mixture", True, "Serve the n-gram mixture when MODEL_DIR/mixture.json exists.")
PRECISION = model_flags.precision_flag("Serve")
FORMAT = flags.DEFINE_enum(
    "format",
    "savedmodel",
    ["savedmodel", "nplm"],
    "savedmodel (TensorFlow Serving), or nplm: one text file for the nplm toolkit and Moses's NeuralLM, written "
    "to --export_dir=FILE.",
)


def check():
    """The version and that --model_dir holds a trained model, before TensorFlow loads; with --ensemble, the
    fit read and checked once: (fit, weights, vocabulary), which `main` exports."""
    if VERSION.value is not None and VERSION.value < 0:
        raise ConfigError(f"version={VERSION.value} must be a non-negative integer.")
    if bool(MODEL_DIR.value) == bool(ENSEMBLE.value):
        raise ConfigError("give one of --model_dir (a trained model) and --ensemble (an ensemble's fit).")
    if ENSEMBLE.value:
        if FORMAT.value != "savedmodel" or not EXPORT_DIR.value or MIXTURE.present:
            raise ConfigError("--ensemble writes a SavedModel to --export_dir (no --format=nplm, no --mixture).")
        files.check_input_file("ensemble", ENSEMBLE.value)
        fit, weights = ensemble.read_fit(ENSEMBLE.value)
        vocab = ensemble.Members.check(fit["model_dirs"], fit["ngram_dirs"])
        files.check_output_dir("export_dir", EXPORT_DIR.value)
        return fit, weights, vocab
    run = run_dir.check_trained(MODEL_DIR.value)
    if FORMAT.value == "nplm":
        if not EXPORT_DIR.value:
            raise ConfigError("--format=nplm needs --export_dir=FILE, the model file to write.")
        given = [f"--{f.name}" for f in (VERSION, PRECISION) if f.present]
        if given:
            raise ConfigError(f"{', '.join(given)} is for SavedModels; leave it out with --format=nplm.")
        if os.path.exists(EXPORT_DIR.value):
            raise ConfigError(
                f"--export_dir={EXPORT_DIR.value} exists; the nplm model is a new file: give another name."
            )
        config = run.read_config()
        why = nplm_format.refusal(config, heads.kind(config))
        if why:
            raise ConfigError(f"{MODEL_DIR.value} cannot be written in the nplm format: {why}")
        files.check_output_file("export_dir", EXPORT_DIR.value)
        return
    files.check_output_dir("export_dir", EXPORT_DIR.value or run.export_dir)


def main(argv, checked):
    if FORMAT.value == "nplm":
        export_nplm()
        return
    app.import_tensorflow_quietly()
    # deferred: TensorFlow loads when this runs, not with the module
    from nplm_tf.serving import saved_model

    if ENSEMBLE.value:
        fit, weights, vocab = checked
        path = saved_model.export_ensemble(fit, weights, vocab, EXPORT_DIR.value, VERSION.value, PRECISION.value)
        print(json.dumps({"export": path, "signatures": list(saved_model.SIGNATURES)}))
        return
    precision = PRECISION.value or loading.SCORING_PRECISION
    notice = hardware.bfloat16_notice(
        precision, advice="--precision=float32 serves the same weights faster on it", training=False
    )
    if notice:
        print(notice, file=sys.stderr, flush=True)
    path = saved_model.export(
        MODEL_DIR.value, EXPORT_DIR.value, VERSION.value, MIXTURE.value, precision=PRECISION.value
    )
    print(json.dumps({"export": path, "signatures": list(saved_model.SIGNATURES)}))


def export_nplm() -> None:
    """The nplm model file, and how near the network is to self-normalized (what Moses assumes)."""
    sizes = nplm_format.write(MODEL_DIR.value, EXPORT_DIR.value)
    stats = nplm_format.log_normalizer_stats(MODEL_DIR.value)
    print(
        f"ln Z over {stats['contexts']:,} validation contexts: mean {stats['mean']:.3f}, sd {stats['sd']:.3f} "
        "(Moses's NeuralLM scores with the raw outputs, which are log-probabilities where ln Z = 0)",
        file=sys.stderr,
    )
    if nplm_format.wide(stats["mean"], stats["sd"]):
        print(
            f"warning: ln Z is far from 0 here, so Moses's raw scores are off by about {stats['mean']:.2f} ± "
            f"{stats['sd']:.2f} nats a word; for Moses, export a self-normalized model (train --loss=nce).",
            file=sys.stderr,
        )
    print(json.dumps({"export": EXPORT_DIR.value, "format": "nplm", **sizes, "ln_z": stats}))


def run():
    app.run(main, check, tensorflow=False)  # a SavedModel's export loads it in `main`


if __name__ == "__main__":
    run()
