"""Writes a trained model as a self-contained SavedModel for TensorFlow Serving.

    python -m nplm_tf.export --model_dir=runs/mlp9 --export_dir=/models/nplm [--version=N]

Writes EXPORT_DIR/<version>/ (default: the next free version number) with the
signatures serving_default, next_word, score and generate; see README.md. If
the model directory holds a fitted n-gram mixture (mixture.json, written by
`nplm_tf.evaluate --ngram_dir`), the served probabilities are the mixture's.
An existing version is never overwritten.
"""

import json

from absl import flags

from pipelines import app

MODEL_DIR = flags.DEFINE_string("model_dir", None, "A directory written by nplm_tf.train.", required=True)
EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "Where to write <version>/saved_model.pb (default: MODEL_DIR/export)."
)
VERSION = flags.DEFINE_integer("version", None, "Version subdirectory (default: one above the largest present).")
MIXTURE = flags.DEFINE_boolean("mixture", True, "Serve the n-gram mixture when MODEL_DIR/mixture.json exists.")


def check() -> None:
    """The version and that --model_dir holds a trained model, before TensorFlow loads."""
    from nplm_tf import run_dir
    from nplm_tf.config import ConfigError

    if VERSION.value is not None and VERSION.value < 0:
        raise ConfigError(f"version={VERSION.value} must be a non-negative integer.")
    run_dir.check_trained(MODEL_DIR.value)


def main(argv, checked):
    from nplm_tf.serving import saved_model

    path = saved_model.export(MODEL_DIR.value, EXPORT_DIR.value, VERSION.value, MIXTURE.value)
    print(json.dumps({"export": path, "signatures": list(saved_model.SIGNATURES)}))


def run():
    app.run(main, check)


if __name__ == "__main__":
    run()
