"""A table of training runs: what each one is, how far it got, and its perplexities.

    python -m nplm_tf.runs --model_dirs='runs/*'
    python -m nplm_tf.runs --model_dirs='runs/full_*,runs/sl_*' --sort=test --format=tsv
    python -m nplm_tf.runs --model_dirs='runs/*' --plot=runs/curves.png

Reads each model directory's `config.json`, `corpus.json`, `history.json` and `metrics.json` (never the
weights, never TensorFlow), and prints one row a run:

- `run`: the directory; `corpus`: the corpus it was trained on; `settings`: the configuration fields that
  differ from `nplm_tf.train`'s defaults (the seed among them), `--flag=value` as `train` takes them;
- `status`: `finished`, `epoch k of E` (stopped or still training; run the same command to resume) or
  `no epoch yet`;
- `epochs` trained and the `best` one (by validation perplexity), the best `valid` perplexity, the exact
  `test` perplexity once the run has finished, `|V|`, the `training s` of its epochs and their median
  `tokens/s`.

Rows come best first by --sort (valid, test, or name); a run without the figure sorts last. Directories the
globs match that are not model directories (no `config.json`) are left out, with a note on stderr; none at all
is an error. `--format=table` (the default on a terminal) aligns the columns, `markdown` (the default when
piped) prints a table to paste, `tsv` one to read with other tools, `json` a list of objects.

`--plot=FILE` (`.png`, `.pdf` or `.svg`) also draws the runs' learning curves: the validation perplexity after
each epoch, over epochs (left) and over the training seconds spent so far (right, validation passes not
counted), the best epoch of each run marked and a finished run's test perplexity in its label. Runs with no
epoch yet are in the table only.
"""

from __future__ import annotations

import sys

from absl import flags

from nplm_tf.tools import run_table
from pipelines import app, tables

MODEL_DIRS = flags.DEFINE_string(
    "model_dirs", "runs/*", "Model directories: comma-separated directories or globs (quote them for the shell)."
)
SORT = flags.DEFINE_enum("sort", "valid", ["valid", "test", "name"], "Order of the rows: best first, or by name.")
FORMAT = flags.DEFINE_enum(
    "format",
    None,
    ["table", "markdown", "tsv", "json"],
    "Output format (default: an aligned table on a terminal, Markdown when piped).",
)
PLOT = flags.DEFINE_string(
    "plot",
    None,
    "Also draw the runs' validation perplexity over epochs and over training seconds into this file "
    "(.png, .pdf or .svg).",
)


def check():
    run_table.check_plot(PLOT.value)
    return run_table.check_dirs(MODEL_DIRS.value)


def main(argv, checked):
    rows, others = checked

    form = FORMAT.value or ("table" if tables.on_terminal() else "markdown")
    print(run_table.render(run_table.ordered(rows, SORT.value), form))
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        which = "directory" if len(others) == 1 else "directories"
        print(f"note: left out {len(others)} {which} without config.json: {shown}", file=sys.stderr)
    if PLOT.value is not None:
        drawn = run_table.plot(run_table.ordered(rows, SORT.value), PLOT.value)
        print(f"note: {PLOT.value}: the learning curves of {drawn} of the {len(rows)} runs", file=sys.stderr)


def run():
    app.run(main, check, tensorflow=False)  # JSON files only


if __name__ == "__main__":
    run()
