"""The flags of `nplm_tf.export` and their checks: `define` defines them on behalf of the
binary (whose --help lists them), and the checks read them once parsed. Imported by the binary only.
"""

from __future__ import annotations

import os

from absl import flags

from nplm_tf.core import run_dir
from nplm_tf.core.config import ConfigError
from nplm_tf.inference import nplm_format
from nplm_tf.network import heads
from nplm_tf.tools import ensemble, model_flags
from pipelines import app, files

flags.disclaim_key_flags()  # `define` defines the flags for its caller, the binary
FLAGS = flags.FLAGS


def define() -> None:
    """Defines `nplm_tf.export`'s flags on behalf of the binary that calls it."""
    app.define_path("model_dir", None, "A directory written by nplm_tf.train.")
    app.define_path(
        "ensemble",
        None,
        "Instead of --model_dir: an ensemble's fit (nplm_tf.evaluate --model_dirs --save_ensemble=FILE), exported as "
        "one SavedModel to --export_dir.",
    )
    app.define_path("export_dir", None, "Where to write <version>/saved_model.pb (default: MODEL_DIR/export).")
    flags.DEFINE_integer("version", None, "Version subdirectory (default: one above the largest present).")
    flags.DEFINE_boolean("mixture", True, "Serve the n-gram mixture when MODEL_DIR/mixture.json exists.")
    model_flags.precision_flag("Serve")
    flags.DEFINE_enum(
        "format",
        "savedmodel",
        ["savedmodel", "nplm"],
        "savedmodel (TensorFlow Serving), or nplm: one text file for the nplm toolkit and Moses's NeuralLM, written "
        "to --export_dir=FILE.",
    )


def check():
    """The version and that --model_dir holds a trained model, before TensorFlow loads; with --ensemble, the
    fit read and checked once: (fit, weights, vocabulary), which `main` exports."""
    if FLAGS.version is not None and FLAGS.version < 0:
        raise ConfigError(f"version={FLAGS.version} must be a non-negative integer.")
    if bool(FLAGS.model_dir) == bool(FLAGS.ensemble):
        raise ConfigError("give one of --model_dir (a trained model) and --ensemble (an ensemble's fit).")
    if FLAGS.ensemble:
        if FLAGS.format != "savedmodel" or not FLAGS.export_dir or FLAGS["mixture"].present:
            raise ConfigError("--ensemble writes a SavedModel to --export_dir (no --format=nplm, no --mixture).")
        files.check_input_file("ensemble", FLAGS.ensemble)
        fit, weights = ensemble.read_fit(FLAGS.ensemble)
        vocab = ensemble.Members.check(fit["model_dirs"], fit["ngram_dirs"])
        files.check_output_dir("export_dir", FLAGS.export_dir)
        return fit, weights, vocab
    run = run_dir.check_trained(FLAGS.model_dir)
    if FLAGS.format == "nplm":
        if not FLAGS.export_dir:
            raise ConfigError("--format=nplm needs --export_dir=FILE, the model file to write.")
        given = [f"--{f.name}" for f in (FLAGS["version"], FLAGS["precision"]) if f.present]
        if given:
            raise ConfigError(f"{', '.join(given)} is for SavedModels; leave it out with --format=nplm.")
        if os.path.exists(FLAGS.export_dir):
            raise ConfigError(
                f"--export_dir={FLAGS.export_dir} exists; the nplm model is a new file: give another name."
            )
        config = run.read_config()
        why = nplm_format.refusal(config, heads.kind(config))
        if why:
            raise ConfigError(f"{FLAGS.model_dir} cannot be written in the nplm format: {why}")
        files.check_output_file("export_dir", FLAGS.export_dir)
        return
    files.check_output_dir("export_dir", FLAGS.export_dir or run.export_dir)
