"""Reproduces the paper's Table 1 comparison on Brown (or your corpus).

    NLTK_DATA=../shared/nltk_data python -m nplm_tf.reproduce --output=runs/table1
    python -m nplm_tf.reproduce --output=runs/table1_quick --quick     # MLP7, MLP9; one epoch each

Trains MLP1, MLP3, MLP5, MLP7 and MLP9 (n, h, m, direct as in the paper),
mixes each with the paper's interpolated trigram (MLP2, 4, 6, 8, 10), builds
the interpolated trigram and Kneser-Ney 3/4/5, and writes OUTPUT/table.md,
table.json and curves.png. Run it again to resume: finished rows are kept.
`--seeds=1234,2,3` trains each network once per seed (the config's own seed in
OUTPUT/<row>, the others in OUTPUT/<row>_seed<S>, so a finished table gains
seeds without training again) and reports their geometric mean, its interval
resampling the runs as well as the test units.

    python -m nplm_tf.reproduce --best --output=runs/best

trains the best model instead (`experiments/best.py`): the networks of the
shipped recipe (`nplm_tf/configs/brown_best.json`, or --config_json; with
--seeds, one network per seed), their ensemble, and the ensemble mixed with
KN5, in OUTPUT/best.md and best.json, the fit in OUTPUT/ensemble.json. The
corpus flags train it on your corpus; `--budget=2h` trains as many networks
as fit in two hours, the most valuable first.
"""

import json
import sys
import time

from absl import flags

from nplm_tf.config import Config
from pipelines import app, corpus_flags, files
from pipelines.errors import UserError

OUTPUT = app.define_path("output", None, "Directory for every model and the table.", required=True)
QUICK = flags.DEFINE_boolean(
    "quick",
    False,
    "A reduced run in minutes: MLP7 and MLP9 only (with --best, every network), one epoch, no train perplexity.",
)
BEST = flags.DEFINE_boolean(
    "best", False, "The best model instead of Table 1: the shipped recipe's networks, their ensemble, and KN5."
)
CONFIG_JSON = app.define_path(
    "config_json",
    None,
    "Training settings shared by every network (default: nplm_tf's; with --best, nplm_tf/configs/brown_best.json).",
)
EPOCHS = flags.DEFINE_integer("epochs", None, "Epochs per network (default: the config's; 1 with --quick).")
BUDGET = flags.DEFINE_string(
    "budget",
    None,
    "With --best: the time the run may take (2h, 90m, 45min, 600s): networks train, the most valuable first, "
    "while the next one fits in what is left (at least one), and the ensemble keeps those trained.",
)
SEEDS = flags.DEFINE_list(
    "seeds",
    [],
    "Train each network once per seed (comma-separated; default: the config's seed alone) and report the runs' "
    "geometric mean, with intervals that resample the runs too.",
)


def settings():
    """The base config and the corpus, from the flags; checked without TensorFlow (`app.run` calls it first)."""
    files.check_output_dir("output", OUTPUT.value)
    corpus = corpus_flags.corpus_from_flags()
    if CONFIG_JSON.value:
        base = Config.from_json(CONFIG_JSON.value)
    elif BEST.value:
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.experiments import best

        base, note = best.recipe(corpus)
        if note:
            print(note, flush=True)
    else:
        base = Config()
    epochs = EPOCHS.value if EPOCHS.value is not None else (1 if QUICK.value else base.epochs)
    base = base.replace(epochs=epochs)  # validated: --epochs=0 is an error, not the default
    try:
        seeds = [int(s) for s in SEEDS.value]
    except ValueError:
        raise UserError(f"--seeds={','.join(SEEDS.value)} must be comma-separated whole numbers.") from None
    if len(set(seeds)) != len(seeds):
        raise UserError(f"--seeds={','.join(SEEDS.value)} names a seed twice.")
    for seed in seeds:
        base.replace(seed=seed)  # each in the config's range, or the config's one sentence
    budget = None
    if BUDGET.value is not None:
        if not BEST.value:
            raise UserError("--budget is for --best (it chooses how many of the recipe's networks train).")
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.experiments import best

        budget = best.budget_seconds(BUDGET.value)
    return base, seeds, corpus, budget


def main(argv, checked):
    # deferred: TensorFlow loads when this runs, not with the module
    from nplm_tf.experiments import table1

    start = time.perf_counter()
    base, seeds, corpus, budget = checked  # from settings()
    command = "python -m nplm_tf.reproduce " + " ".join(sys.argv[1:])
    if BEST.value:
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.experiments import best

        result = best.run_recipe(OUTPUT.value, corpus, base, seeds, budget)
        best.write(OUTPUT.value, result, command)
        print(json.dumps({r["name"]: round(r["test"], 2) for r in result["rows"]}))
        return
    ngrams = [
        table1.ngram_row(OUTPUT.value, corpus, base, spec)
        for spec in table1.NGRAMS
        if not QUICK.value or spec[1] in ("interp3", "kn3", "kn5")
    ]
    rows = []
    for row in table1.ROWS:
        if QUICK.value and row.name not in table1.QUICK_ROWS:
            continue
        print(f"{row.name}: n={row.order}, h={row.hidden_dim}, m={row.feature_dim}, direct={row.direct}", flush=True)
        rows += table1.network_rows(
            OUTPUT.value, corpus, base, row, ngrams[0]["dir"], train_perplexity=not QUICK.value, seeds=seeds
        )
    table1.write_table(
        OUTPUT.value,
        rows + ngrams,
        command,
        time.perf_counter() - start,
        table1.protocol(corpus.name, base.min_count, base.max_vocab),
    )
    print(json.dumps({r["name"]: round(r["test"], 2) for r in rows + ngrams}))


def run():
    app.run(main, settings, resumable=True)


if __name__ == "__main__":
    run()
