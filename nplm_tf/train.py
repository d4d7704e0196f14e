"""Trains the Bengio et al. (2003) NPLM and writes DIR/metrics.json.

    python -m nplm_tf.train --model_dir=runs/mlp9           # Brown, paper's MLP9
    python -m nplm_tf.train --model_dir=DIR --corpus=files \\
        --train_files='data/train*.txt' --valid_files=... --test_files=...

Interrupt it at any time and run the same command again to resume.
"""

import json

from absl import flags

from nplm_tf.core import hardware
from nplm_tf.core.run_dir import TrainingLock
from nplm_tf.tools import train_flags
from nplm_tf.tools.train_flags import TRAIN_DEFAULTS, check_flags, config_from_flags  # noqa: F401  (probes read them)
from nplm_tf.training import run_setup, strategies
from pipelines import app

train_flags.define()  # this binary's own flags: its --help lists them
FLAGS = flags.FLAGS


def main(argv, checked):
    metrics = train_from_flags(*checked)
    print(json.dumps({k: metrics[k] for k in ("valid_perplexity", "test_perplexity", "vocab_size", "tokens")}))


def train_from_flags(config, corpus) -> dict:
    """The run the flags ask for (`check_flags`'s config and corpus; also `benchmarks.brown`'s): trained, or
    resumed, or, finished before with this config, its metrics without loading TensorFlow."""
    if FLAGS.strategy == "multi_worker":  # Keras fit fails under MultiWorkerMirroredStrategy: a custom loop
        strategy = _strategy(config)
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.distributed import multi_worker

        metrics = multi_worker.train_multi_worker(
            config, FLAGS.model_dir, corpus, strategy, FLAGS.ngram_dir, FLAGS.export
        )
    else:
        with TrainingLock(FLAGS.model_dir) as lock:
            strategy = None
            if FLAGS.strategy == "mirrored":
                # A machine's GPUs (the replicas) are known only once TensorFlow loads: the batch's split over
                # them is checked before anything is written, at the cost of loading TensorFlow first.
                strategy = _strategy(config)
                strategies.check_batch_split(config.batch_size, strategy.num_replicas_in_sync)
            # The data, the vocabulary and the tail n-gram are checked (and a new run set up) before TensorFlow
            # loads, which takes seconds: a bad file or a flag that depends on |V| is refused at once.
            set_up = run_setup.set_up_run(config, FLAGS.model_dir, corpus, FLAGS.ngram_dir, lock)
            metrics = set_up[0]  # a run that finished with this config: its metrics, nothing loaded
            if metrics is None:
                if strategy is None:
                    strategy = _strategy(config)
                # deferred: TensorFlow loads when this runs, not with the module
                from nplm_tf.training import trainer

                metrics = trainer.train_and_evaluate(
                    config, FLAGS.model_dir, corpus, strategy, export=FLAGS.export, set_up=set_up
                )
    return metrics


def _strategy(config):
    """Loads TensorFlow (quietly), splits the CPU as --num_cpu_devices asks before anything is built, and
    returns the run's tf.distribute strategy."""
    app.import_tensorflow_quietly()
    strategies.split_cpu(FLAGS.num_cpu_devices)

    notice = hardware.bfloat16_notice(config.precision)  # after the flag checks: a bad flag is one sentence
    if notice:
        print(notice, flush=True)
    return strategies.make_strategy(FLAGS.strategy, FLAGS.num_cpu_devices)


def run():
    app.run(main, check_flags, tensorflow=False, resumable=True)  # main loads TensorFlow once the data is checked


if __name__ == "__main__":
    run()
