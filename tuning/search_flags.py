"""The flags of `tuning.search` and their checks: `define` defines them on behalf of the
binary (whose --help lists them), and the checks read them once parsed. Imported by the binary only.
"""

from __future__ import annotations

import os

from absl import flags

from nplm_tf.core.config import Config, ConfigError
from nplm_tf.training import strategies
from nplm_tf.training.data import prepare_vocabulary
from pipelines import app, corpus_flags, files

flags.disclaim_key_flags()  # `define` defines the flags for its caller, the binary
FLAGS = flags.FLAGS


def define() -> None:
    """Defines `tuning.search`'s flags on behalf of the binary that calls it."""
    flags.DEFINE_enum("tuner", "random", ["random", "hyperband", "bayesian"], "keras-tuner algorithm.")
    flags.DEFINE_integer("max_trials", 12, "Trials to run (random, bayesian; hyperband's are set by its brackets).")
    flags.DEFINE_integer(
        "epochs_per_trial",
        2,
        "Training epochs per trial (hyperband: the most for one configuration, which sets how many it tries: 2 for 2, "
        "9 for 17).",
    )
    app.define_path("output_dir", None, "Directory for the search state, trial runs and results.", required=True)
    app.define_path("config_json", None, "Settings that are not searched (default: nplm_tf's defaults).")
    flags.DEFINE_boolean("tune_order", False, "Also search n in {3, 4, 5, 6}.")
    flags.DEFINE_boolean("tune_direct", False, "Also search the direct connections W.")
    flags.DEFINE_boolean(
        "tune_shortlist",
        False,
        "Also search the short list's size N in {0 (full softmax), 2000, 4000, 8000}, below |V|; the lists use the "
        "tail of --config_json (a config of N > 0 may set one; class by default).",
    )
    flags.DEFINE_boolean(
        "tune_learning_rate",
        False,
        "Also search the learning rate ε_0 in {0.5, 1, 2, 4} × the config's (Adam's default 1e-3: 5e-4 to 4e-3).",
    )
    flags.DEFINE_integer(
        "num_cpu_devices",
        1,
        "Logical CPU devices: MirroredStrategy's replicas when no GPU. One replica uses the whole CPU; two on 2 cores "
        "train slower (benchmarks/README.md).",
    )
    flags.DEFINE_integer("seed", 1, "Seed of the tuner's sampling.")
    flags.DEFINE_boolean("report_only", False, "Write the result files from the trials finished so far; run none.")


def check_cluster_env(environ=os.environ) -> None:
    """The distributed search's environment (keras-tuner reads it per trial, failing with a traceback): with
    KERASTUNER_ORACLE_IP set, KERASTUNER_ORACLE_PORT a port and KERASTUNER_TUNER_ID a name; none set: one process."""
    if "KERASTUNER_ORACLE_IP" not in environ:
        if "KERASTUNER_ORACLE_PORT" in environ:
            raise ConfigError("KERASTUNER_ORACLE_PORT is set without KERASTUNER_ORACLE_IP, the chief's address.")
        return
    port = environ.get("KERASTUNER_ORACLE_PORT", "")
    if not (port.isdigit() and 0 < int(port) < 65536):
        raise ConfigError(f"KERASTUNER_ORACLE_PORT={port!r} must be the chief's port, an integer in [1, 65535].")
    if not environ.get("KERASTUNER_ORACLE_IP") or not environ.get("KERASTUNER_TUNER_ID"):
        raise ConfigError(
            "a distributed search needs KERASTUNER_ORACLE_IP (the chief's address) and KERASTUNER_TUNER_ID "
            "(chief on the chief, tuner0, tuner1, ... on the workers)."
        )


def check_tuner(kind: str) -> None:
    """The Bayesian tuner's Gaussian process comes from scikit-learn and scipy (keras-tuner's `bayesian` extra,
    which setup.py installs): without them keras-tuner failed with a traceback once the data had been read."""
    if kind != "bayesian":
        return
    try:
        import scipy.optimize  # noqa: F401
        import sklearn.gaussian_process  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            f"--tuner=bayesian needs scikit-learn and scipy, and {e.name or 'one of them'} did not import: "
            "pip install 'keras-tuner[bayesian]==1.4.8'."
        ) from None


def check_flags():
    """The base config, the corpus and its vocabulary, once the flag values and the data are checked, without
    TensorFlow (`app.run` calls it first)."""
    strategies.check_cpu_devices(FLAGS.num_cpu_devices)
    check_cluster_env()
    check_tuner(FLAGS.tuner)
    files.check_output_dir("output_dir", FLAGS.output_dir)
    if FLAGS.max_trials < 1 or FLAGS.epochs_per_trial < 1:
        raise ConfigError(
            f"max_trials={FLAGS.max_trials} and epochs_per_trial={FLAGS.epochs_per_trial} must be at least 1."
        )
    base = Config.from_json(FLAGS.config_json) if FLAGS.config_json else Config()
    strategies.check_local_sgd(base.sync_every, multi_worker=False)  # trials train in one process each
    if FLAGS.tune_shortlist and base.loss != "softmax":  # its trials of N > 0 would all fail
        raise ConfigError(
            f"--tune_shortlist searches short lists, which train with the softmax, but the config's "
            f"loss={base.loss!r} trains the full vocabulary by sampling; drop one of the two."
        )
    corpus = corpus_flags.corpus_from_flags()
    return base, corpus, prepare_vocabulary(base, corpus)  # the data checked before TensorFlow loads too
