"""Writes a trained model as a self-contained SavedModel for TensorFlow Serving.

    python -m nplm_tf.export --model_dir=runs/mlp9 --export_dir=/models/nplm [--version=N]

Writes EXPORT_DIR/<version>/ (default: the next free version number) with the
signatures serving_default, next_word, score and generate; see README.md. If
the model directory holds a fitted n-gram mixture (mixture.json, written by
`nplm_tf.evaluate --ngram_dir`), the served probabilities are the mixture's.
An existing version is never overwritten. `--precision=float32` serves a
model trained in mixed_bfloat16 in float32 (the same weights), which is faster
on a CPU without bfloat16 instructions; its probabilities are then
`nplm_tf.evaluate --precision=float32`'s.
"""

import json

from absl import flags

from nplm_tf import run_dir
from pipelines import app

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.", required=True)
EXPORT_DIR = app.define_path("export_dir", None, "Where to write <version>/saved_model.pb (default: MODEL_DIR/export).")
VERSION = flags.DEFINE_integer("version", None, "Version subdirectory (default: one above the largest present).")
MIXTURE = flags.DEFINE_boolean("mixture", True, "Serve the n-gram mixture when MODEL_DIR/mixture.json exists.")
PRECISION = run_dir.precision_flag("Serve")


def check() -> None:
    """The version and that --model_dir holds a trained model, before TensorFlow loads."""
    from nplm_tf.config import ConfigError
    from pipelines import files

    if VERSION.value is not None and VERSION.value < 0:
        raise ConfigError(f"version={VERSION.value} must be a non-negative integer.")
    run_dir.check_trained(MODEL_DIR.value)
    files.check_output_dir("export_dir", EXPORT_DIR.value or run_dir.RunDir(MODEL_DIR.value).export_dir)


def main(argv, checked):
    import sys

    from nplm_tf import hardware
    from nplm_tf.serving import saved_model

    precision = PRECISION.value or run_dir.RunDir(MODEL_DIR.value).read_config().precision
    notice = hardware.bfloat16_notice(
        precision, advice="--precision=float32 serves the same weights faster on it", training=False
    )
    if notice:
        print(notice, file=sys.stderr, flush=True)
    path = saved_model.export(
        MODEL_DIR.value, EXPORT_DIR.value, VERSION.value, MIXTURE.value, precision=PRECISION.value
    )
    print(json.dumps({"export": path, "signatures": list(saved_model.SIGNATURES)}))


def run():
    app.run(main, check)


if __name__ == "__main__":
    run()
