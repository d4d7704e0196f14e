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

from nplm_tf.experiments import reproduce_flags
from nplm_tf.experiments.reproduce_flags import settings
from pipelines import app

reproduce_flags.define()  # this binary's own flags: its --help lists them
FLAGS = flags.FLAGS


def main(argv, checked):
    # deferred: TensorFlow loads when this runs, not with the module
    from nplm_tf.experiments import table1

    start = time.perf_counter()
    base, seeds, corpus, budget = checked  # from settings()
    command = "python -m nplm_tf.reproduce " + " ".join(sys.argv[1:])
    if FLAGS.best:
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.experiments import best

        result = best.run_recipe(FLAGS.output, corpus, base, seeds, budget)
        best.write(FLAGS.output, result, command)
        print(json.dumps({r["name"]: round(r["test"], 2) for r in result["rows"]}))
        return
    ngrams = [
        table1.ngram_row(FLAGS.output, corpus, base, spec)
        for spec in table1.NGRAMS
        if not FLAGS.quick or spec[1] in ("interp3", "kn3", "kn5")
    ]
    rows = []
    for row in table1.ROWS:
        if FLAGS.quick and row.name not in table1.QUICK_ROWS:
            continue
        print(f"{row.name}: n={row.order}, h={row.hidden_dim}, m={row.feature_dim}, direct={row.direct}", flush=True)
        rows += table1.network_rows(
            FLAGS.output, corpus, base, row, ngrams[0]["dir"], train_perplexity=not FLAGS.quick, seeds=seeds
        )
    table1.write_table(
        FLAGS.output,
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
