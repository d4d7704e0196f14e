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
import sys

from absl import flags

from nplm_tf.core import hardware
from nplm_tf.inference import nplm_format
from nplm_tf.network import loading
from nplm_tf.tools import export_flags
from nplm_tf.tools.export_flags import check
from pipelines import app

export_flags.define()  # this binary's own flags: its --help lists them
FLAGS = flags.FLAGS


def main(argv, checked):
    if FLAGS.format == "nplm":
        export_nplm()
        return
    app.import_tensorflow_quietly()
    # deferred: TensorFlow loads when this runs, not with the module
    from nplm_tf.serving import saved_model

    if FLAGS.ensemble:
        fit, weights, vocab = checked
        path = saved_model.export_ensemble(fit, weights, vocab, FLAGS.export_dir, FLAGS.version, FLAGS.precision)
        print(json.dumps({"export": path, "signatures": list(saved_model.SIGNATURES)}))
        return
    precision = FLAGS.precision or loading.SCORING_PRECISION
    notice = hardware.bfloat16_notice(
        precision, advice="--precision=float32 serves the same weights faster on it", training=False
    )
    if notice:
        print(notice, file=sys.stderr, flush=True)
    path = saved_model.export(
        FLAGS.model_dir, FLAGS.export_dir, FLAGS.version, FLAGS.mixture, precision=FLAGS.precision
    )
    print(json.dumps({"export": path, "signatures": list(saved_model.SIGNATURES)}))


def export_nplm() -> None:
    """The nplm model file, and how near the network is to self-normalized (what Moses assumes)."""
    sizes = nplm_format.write(FLAGS.model_dir, FLAGS.export_dir)
    stats = nplm_format.log_normalizer_stats(FLAGS.model_dir)
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
    print(json.dumps({"export": FLAGS.export_dir, "format": "nplm", **sizes, "ln_z": stats}))


def run():
    app.run(main, check, tensorflow=False)  # a SavedModel's export loads it in `main`


if __name__ == "__main__":
    run()
