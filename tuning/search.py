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

from nplm_tf.core.config import ConfigError
from nplm_tf.training import strategies
from pipelines import app
from tuning import search_flags
from tuning.search_flags import check_flags

search_flags.define()  # this binary's own flags: its --help lists them
FLAGS = flags.FLAGS


def main(argv, checked):
    strategies.split_cpu(FLAGS.num_cpu_devices)
    # deferred: TensorFlow and keras-tuner loads when this runs, not with the module
    from keras_tuner.src.distribute import utils as dist_utils

    from tuning import hypermodel as hypermodel_lib
    from tuning import search_lib

    base, corpus, vocab = checked
    strategy = strategies.make_strategy("mirrored", FLAGS.num_cpu_devices)  # the CPU split's replicas, or the GPUs
    strategies.check_batch_split(base.batch_size, strategy.num_replicas_in_sync)  # every trial trains under it
    os.makedirs(FLAGS.output_dir, exist_ok=True)  # once the data and the batch are checked
    hypermodel = hypermodel_lib.NPLMHyperModel(
        base,
        corpus,
        vocab.size,
        FLAGS.output_dir,
        tune_order=FLAGS.tune_order,
        tune_direct=FLAGS.tune_direct,
        tune_shortlist=FLAGS.tune_shortlist,
        tune_learning_rate=FLAGS.tune_learning_rate,
        counts=vocab.counts,
    )
    holds_oracle = not dist_utils.has_chief_oracle() or dist_utils.is_chief_oracle()
    mended = search_lib.mend_cut_short_state(
        FLAGS.output_dir, os.environ.get("KERASTUNER_TUNER_ID", "tuner0"), holds_oracle, FLAGS.report_only
    )
    if mended:
        print(mended, flush=True)
    tuner = search_lib.make_tuner(
        FLAGS.tuner, hypermodel, FLAGS.output_dir, FLAGS.max_trials, FLAGS.epochs_per_trial, strategy, FLAGS.seed
    )
    if not FLAGS.report_only:
        if FLAGS.tuner == "hyperband":
            print(search_lib.hyperband_note(FLAGS.epochs_per_trial), flush=True)
        try:  # never inside strategy.scope(): keras-tuner enters it per trial
            tuner.search(epochs=FLAGS.epochs_per_trial, verbose=0)
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
    summary = search_lib.write_results(FLAGS.output_dir, rows, base, FLAGS.tuner)
    print(
        json.dumps(
            {"role": os.environ.get("KERASTUNER_TUNER_ID", "single"), "best_trial": summary["best"]["trial"], **summary}
        )
    )


def run():
    app.run(main, check_flags, resumable=True)


if __name__ == "__main__":
    run()
