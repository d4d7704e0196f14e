"""`nplm_tf.runs`'s table and plot of model directories: a row of settings, progress and figures per run, in a
table, markdown, TSV or JSON, and their learning curves."""

from __future__ import annotations

import json
import math
import os
import statistics

from nplm_tf.core.config import Config
from nplm_tf.core.run_dir import RunDir
from nplm_tf.tools.model_flags import match_model_dirs
from pipelines import files, tables
from pipelines.errors import UserError

PLOT_FORMATS = (".png", ".pdf", ".svg")

COLUMNS = ("run", "corpus", "settings", "status", "epochs", "best", "valid", "test", "|V|", "training s", "tokens/s")


def settings(config) -> str:
    """The fields of `config` that differ from the defaults, as `train` flags."""
    defaults, mine = Config().to_dict(), config.to_dict()
    return " ".join(f"--{k}={_flag_value(v)}" for k, v in mine.items() if v != defaults.get(k))


def _flag_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def summary(path: str) -> dict:
    """One run's row (`COLUMNS`; missing figures None)."""
    run = RunDir(path)
    config = run.read_config()
    history = [record for _, record in sorted(run.read_history().items())]
    metrics = run.read_metrics()
    corpus = (run.read_corpus() or {}).get("corpus")
    finished = metrics is not None and metrics.get("config", {}).get("epochs") == config.epochs
    best = min(history, key=lambda e: e["valid_perplexity"]) if history else None
    if finished:
        status = "finished"
    elif history:
        status = f"epoch {len(history)} of {config.epochs}"
    else:
        status = "no epoch yet"
    rates = [e["tokens_per_second"] for e in history if e.get("tokens_per_second")]
    return {
        "run": path,
        "corpus": corpus,
        "settings": settings(config),
        "status": status,
        "epochs": len(history),
        "best": best["epoch"] if best else None,
        "valid": best["valid_perplexity"] if best else None,
        "test": metrics.get("test_perplexity") if finished else None,
        "|V|": metrics.get("vocab_size") if metrics else run.load_vocab().size if run.has_vocab() else None,
        "training s": sum(e["seconds"] for e in history) if history else None,
        "tokens/s": statistics.median(rates) if rates else None,
    }


def ordered(rows: list[dict], key: str) -> list[dict]:
    if key == "name":
        return sorted(rows, key=lambda r: r["run"])
    return sorted(rows, key=lambda r: (r[key] is None, r[key] if r[key] is not None else math.inf, r["run"]))


def cell(column: str, value) -> str:
    if value is None:
        return ""
    if column in ("valid", "test"):
        return f"{value:.2f}"
    if column in ("training s", "tokens/s"):
        return f"{value:,.0f}"
    if column == "|V|":
        return f"{value:,}"
    return str(value)


def render(rows: list[dict], form: str) -> str:
    if form == "json":
        return json.dumps(rows, indent=2)
    table = [[cell(c, row[c]) for c in COLUMNS] for row in rows]
    if form == "table":
        return tables.text_table(
            COLUMNS, table, right=[c not in ("run", "corpus", "settings", "status") for c in COLUMNS]
        )
    if form == "tsv":
        return "\n".join("\t".join(line) for line in [list(COLUMNS), *table])
    escaped = [[text.replace("|", "\\|") for text in line] for line in table]
    header = [c.replace("|", "\\|") for c in COLUMNS]
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, ["---"] * len(COLUMNS), *escaped])


def curve(path: str) -> list[tuple[int, float, float]]:
    """A run's (epoch, training seconds up to its end, valid perplexity) after each epoch, in order."""
    points, seconds = [], 0.0
    for _, record in sorted(RunDir(path).read_history().items()):
        seconds += record["seconds"]
        points.append((record["epoch"], seconds, record["valid_perplexity"]))
    return points


def labels(paths: list[str]) -> list[str]:
    """The shortest trailing parts of the paths that tell them apart: `sl` for runs/sl, `s2/sl` beside s3/sl."""
    parts = [os.path.normpath(p).split(os.sep) for p in paths]
    for k in range(1, max((len(p) for p in parts), default=1) + 1):
        names = [os.path.join(*p[-k:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [os.path.normpath(p) for p in paths]


def check_plot(path: str | None) -> None:
    if path is None:
        return
    files.check_output_file("plot", path)
    if os.path.splitext(path)[1].lower() not in PLOT_FORMATS:
        raise UserError(f"--plot={path} must end in .png, .pdf or .svg (the figure's format).")


def figure(rows: list[dict]):
    """(a matplotlib figure of the learning curves of the rows' runs that have an epoch, their number)."""
    # deferred: matplotlib loads when this runs, not with the module
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib loads when this runs, not with the module
    from matplotlib import pyplot as plt

    drawn = [row for row in rows if row["epochs"]]
    fig, (by_epoch, by_time) = plt.subplots(1, 2, figsize=(11, 4.8), dpi=100, sharey=True)
    for i, (row, label) in enumerate(zip(drawn, labels([row["run"] for row in drawn]))):
        points = curve(row["run"])
        epochs, seconds, valid = zip(*points)
        if row["test"] is not None:
            label += f" (test {row['test']:.2f})"
        style = ("-", "--", ":", "-.")[i // 10 % 4]  # the colours repeat after ten runs
        (line,) = by_epoch.plot(epochs, valid, linestyle=style, marker=".", label=label)
        by_time.plot(seconds, valid, linestyle=style, marker=".", color=line.get_color())
        best = next(p for p in points if p[0] == row["best"])  # the epoch `summary` chose
        for axes, x in ((by_epoch, best[0]), (by_time, best[1])):
            axes.plot([x], [best[2]], marker="o", markersize=9, fillstyle="none", color=line.get_color())
    by_epoch.set_xlabel("epoch")
    by_time.set_xlabel("training seconds (validation not counted)")
    by_epoch.set_ylabel("validation perplexity (circle: the best epoch)")
    for axes in (by_epoch, by_time):
        axes.grid(True, alpha=0.3)
    if drawn:
        by_epoch.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig, len(drawn)


def plot(rows: list[dict], path: str) -> int:
    """Writes `figure(rows)` to `path`, atomically; the number of runs drawn."""
    fig, drawn = figure(rows)  # before pyplot's import: it chooses the Agg backend
    # deferred: matplotlib loads when this runs, not with the module
    from matplotlib import pyplot as plt

    try:
        files.replace_atomically(path, fig.savefig)
    finally:
        plt.close(fig)
    return drawn


def check_dirs(patterns: str) -> tuple[list[dict], list[str]]:
    """(a row per model directory the globs match, the other directories they match); a damaged file is one
    sentence naming it."""
    runs, others = match_model_dirs(patterns)
    return [summary(path) for path in runs], others
