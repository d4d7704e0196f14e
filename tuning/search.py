"""keras-tuner search over hidden size h and feature count m (and n, W, N, ε_0), each trial under MirroredStrategy.

    python -m tuning.search --output_dir=runs/search --max_trials=12 --epochs_per_trial=2

Writes OUTPUT/results.md, results.json, results.png and best_config.json
(`python -m nplm_tf.train --config_json=OUTPUT/best_config.json ...`). Run the
same command again to resume an interrupted search.

Distributed: start one chief and N workers with the same flags and
KERASTUNER_TUNER_ID=chief | tuner0 | tuner1 ..., KERASTUNER_ORACLE_IP and
KERASTUNER_ORACLE_PORT (the chief's address); the chief holds the oracle and
writes the results when every trial is done.
"""

import json
import os

from absl import flags

from nplm_tf.config import Config, ConfigError
from nplm_tf.training import strategies
from nplm_tf.training.data import prepare_vocabulary
from pipelines import app, corpus_flags, files

TUNER = flags.DEFINE_enum("tuner", "random", ["random", "hyperband", "bayesian"], "keras-tuner algorithm.")
MAX_TRIALS = flags.DEFINE_integer(
    "max_trials", 12, "Trials to run (random, bayesian; hyperband's are set by its brackets)."
)
EPOCHS = flags.DEFINE_integer(
    "epochs_per_trial",
    2,
    "Training epochs per trial (hyperband: the most for one configuration, which sets how many it tries: 2 for 2, "
    "9 for 17).",
)
OUTPUT_DIR = app.define_path(
    "output_dir", None, "Directory for the search state, trial runs and results.", required=True
)
CONFIG_JSON = app.define_path("config_json", None, "Settings that are not searched (default: nplm_tf's defaults).")
TUNE_ORDER = flags.DEFINE_boolean("tune_order", False, "Also search n in {3, 4, 5, 6}.")
TUNE_DIRECT = flags.DEFINE_boolean("tune_direct", False, "Also search the direct connections W.")
TUNE_SHORTLIST = flags.DEFINE_boolean(
    "tune_shortlist",
    False,
    "Also search the short list's size N in {0 (full softmax), 2000, 4000, 8000}, below |V|; the lists use the "
    "tail of --config_json (a config of N > 0 may set one; class by default).",
)
TUNE_LEARNING_RATE = flags.DEFINE_boolean(
    "tune_learning_rate",
    False,
    "Also search the learning rate ε_0 in {0.5, 1, 2, 4} × the config's (Adam's default 1e-3: 5e-4 to 4e-3).",
)
NUM_CPU_DEVICES = flags.DEFINE_integer(
    "num_cpu_devices",
    1,
    "Logical CPU devices: MirroredStrategy's replicas when no GPU. One replica uses the whole CPU; two on 2 cores "
    "train slower (benchmarks/README.md).",
)
SEED = flags.DEFINE_integer("seed", 1, "Seed of the tuner's sampling.")
REPORT_ONLY = flags.DEFINE_boolean(
    "report_only", False, "Write the result files from the trials finished so far; run none."
)


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
    strategies.check_cpu_devices(NUM_CPU_DEVICES.value)
    check_cluster_env()
    check_tuner(TUNER.value)
    files.check_output_dir("output_dir", OUTPUT_DIR.value)
    if MAX_TRIALS.value < 1 or EPOCHS.value < 1:
        raise ConfigError(f"max_trials={MAX_TRIALS.value} and epochs_per_trial={EPOCHS.value} must be at least 1.")
    base = Config.from_json(CONFIG_JSON.value) if CONFIG_JSON.value else Config()
    strategies.check_local_sgd(base.sync_every, multi_worker=False)  # trials train in one process each
    if TUNE_SHORTLIST.value and base.loss != "softmax":  # its trials of N > 0 would all fail
        raise ConfigError(
            f"--tune_shortlist searches short lists, which train with the softmax, but the config's "
            f"loss={base.loss!r} trains the full vocabulary by sampling; drop one of the two."
        )
    corpus = corpus_flags.corpus_from_flags()
    return base, corpus, prepare_vocabulary(base, corpus)  # the data checked before TensorFlow loads too


def main(argv, checked):
    strategies.split_cpu(NUM_CPU_DEVICES.value)
    # deferred: TensorFlow and keras-tuner loads when this runs, not with the module
    from keras_tuner.src.distribute import utils as dist_utils

    from tuning import hypermodel as hypermodel_lib
    from tuning import search_lib

    base, corpus, vocab = checked
    strategy = strategies.make_strategy("mirrored", NUM_CPU_DEVICES.value)  # the CPU split's replicas, or the GPUs
    strategies.check_batch_split(base.batch_size, strategy.num_replicas_in_sync)  # every trial trains under it
    os.makedirs(OUTPUT_DIR.value, exist_ok=True)  # once the data and the batch are checked
    hypermodel = hypermodel_lib.NPLMHyperModel(
        base,
        corpus,
        vocab.size,
        OUTPUT_DIR.value,
        tune_order=TUNE_ORDER.value,
        tune_direct=TUNE_DIRECT.value,
        tune_shortlist=TUNE_SHORTLIST.value,
        tune_learning_rate=TUNE_LEARNING_RATE.value,
        counts=vocab.counts,
    )
    holds_oracle = not dist_utils.has_chief_oracle() or dist_utils.is_chief_oracle()
    mended = search_lib.mend_cut_short_state(
        OUTPUT_DIR.value, os.environ.get("KERASTUNER_TUNER_ID", "tuner0"), holds_oracle, REPORT_ONLY.value
    )
    if mended:
        print(mended, flush=True)
    tuner = search_lib.make_tuner(
        TUNER.value, hypermodel, OUTPUT_DIR.value, MAX_TRIALS.value, EPOCHS.value, strategy, SEED.value
    )
    if not REPORT_ONLY.value:
        if TUNER.value == "hyperband":
            print(search_lib.hyperband_note(EPOCHS.value), flush=True)
        try:  # never inside strategy.scope(): keras-tuner enters it per trial
            tuner.search(epochs=EPOCHS.value, verbose=0)
        except RuntimeError as e:
            # keras-tuner's stop: "Number of consecutive failures exceeded the limit of 3.\n<the last traceback>"
            if not str(e).startswith("Number of consecutive failures"):
                raise
            last = [line for line in str(e).splitlines() if line.strip()][-1]  # "SomeError: its message"
            raise ConfigError(
                f"the search stopped after {tuner.oracle.max_consecutive_failed_trials} failed trials in a row; the "
                f"last: {last.split(': ', 1)[-1].rstrip('.')}."
            ) from None

    if dist_utils.has_chief_oracle() and not dist_utils.is_chief_oracle():
        best = tuner.oracle.get_best_trials(1)  # asked of the chief
        print(json.dumps({"role": os.environ["KERASTUNER_TUNER_ID"], "best_trial": best[0].trial_id if best else None}))
        return
    rows = search_lib.trial_rows(tuner, base)
    summary = search_lib.write_results(OUTPUT_DIR.value, rows, base, TUNER.value)
    print(
        json.dumps(
            {"role": os.environ.get("KERASTUNER_TUNER_ID", "single"), "best_trial": summary["best"]["trial"], **summary}
        )
    )


def run():
    app.run(main, check_flags, resumable=True)


if __name__ == "__main__":
    run()
