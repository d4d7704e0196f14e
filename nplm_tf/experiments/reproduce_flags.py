"""The flags of `nplm_tf.reproduce` and their checks: `define` defines them on behalf of the
binary (whose --help lists them), and the checks read them once parsed. Imported by the binary only.
"""

from __future__ import annotations

from absl import flags

from nplm_tf.core.config import Config
from nplm_tf.experiments import recipe
from pipelines import app, corpus_flags, files
from pipelines.errors import UserError

flags.disclaim_key_flags()  # `define` defines the flags for its caller, the binary
FLAGS = flags.FLAGS


def define() -> None:
    """Defines `nplm_tf.reproduce`'s flags on behalf of the binary that calls it."""
    app.define_path("output", None, "Directory for every model and the table.", required=True)
    flags.DEFINE_boolean(
        "quick",
        False,
        "A reduced run in minutes: MLP7 and MLP9 only (with --best, every network), one epoch, no train perplexity.",
    )
    flags.DEFINE_boolean(
        "best", False, "The best model instead of Table 1: the shipped recipe's networks, their ensemble, and KN5."
    )
    app.define_path(
        "config_json",
        None,
        "Training settings shared by every network (default: nplm_tf's; with --best, nplm_tf/configs/brown_best.json).",
    )
    flags.DEFINE_integer("epochs", None, "Epochs per network (default: the config's; 1 with --quick).")
    flags.DEFINE_string(
        "budget",
        None,
        "With --best: the time the run may take (2h, 90m, 45min, 600s): networks train, the most valuable first, "
        "while the next one fits in what is left (at least one), and the ensemble keeps those trained.",
    )
    flags.DEFINE_list(
        "seeds",
        [],
        "Train each network once per seed (comma-separated; default: the config's seed alone) and report the runs' "
        "geometric mean, with intervals that resample the runs too.",
    )


def settings():
    """The base config and the corpus, from the flags; checked without TensorFlow (`app.run` calls it first)."""
    files.check_output_dir("output", FLAGS.output)
    corpus = corpus_flags.corpus_from_flags()
    if FLAGS.config_json:
        base = Config.from_json(FLAGS.config_json)
    elif FLAGS.best:
        base, note = recipe.recipe(corpus)
        if note:
            print(note, flush=True)
    else:
        base = Config()
    epochs = FLAGS.epochs if FLAGS.epochs is not None else (1 if FLAGS.quick else base.epochs)
    base = base.replace(epochs=epochs)  # validated: --epochs=0 is an error, not the default
    try:
        seeds = [int(s) for s in FLAGS.seeds]
    except ValueError:
        raise UserError(f"--seeds={','.join(FLAGS.seeds)} must be comma-separated whole numbers.") from None
    if len(set(seeds)) != len(seeds):
        raise UserError(f"--seeds={','.join(FLAGS.seeds)} names a seed twice.")
    for seed in seeds:
        base.replace(seed=seed)  # each in the config's range, or the config's one sentence
    budget = None
    if FLAGS.budget is not None:
        if not FLAGS.best:
            raise UserError("--budget is for --best (it chooses how many of the recipe's networks train).")
        budget = recipe.budget_seconds(FLAGS.budget)
    return base, seeds, corpus, budget
