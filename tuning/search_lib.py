"""A keras-tuner search over the NPLM, and its result files.

OUTPUT holds the tuner's own state (OUTPUT/search/: the oracle and its
trials, which is what lets a rerun resume), one training run per trial
(OUTPUT/runs/), and the results: results.json, results.md, results.png and
best_config.json (accepted by `nplm_tf.train --config_json`).
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os

import keras_tuner

from nplm_tf.core.config import Config, ConfigError
from pipelines import files
from pipelines.errors import UserError
from tuning import hypermodel as hypermodel_lib

TUNERS = ("random", "hyperband", "bayesian")
PROJECT = "search"
RESULTS_JSON, RESULTS_MD, RESULTS_PNG, BEST_CONFIG = "results.json", "results.md", "results.png", "best_config.json"


def make_tuner(
    kind: str,
    hypermodel: hypermodel_lib.NPLMHyperModel,
    output_dir: str,
    max_trials: int,
    epochs_per_trial: int,
    strategy,
    seed: int,
) -> keras_tuner.Tuner:
    """One of keras-tuner's tuners; an existing OUTPUT/search is reloaded, so the search resumes. `search.py`
    has checked the counts (at least 1)."""
    common = dict(
        hypermodel=hypermodel,
        objective=hypermodel_lib.OBJECTIVE,
        seed=seed,
        directory=output_dir,
        project_name=PROJECT,
        overwrite=False,
        distribution_strategy=strategy,
    )
    if kind == "random":
        return keras_tuner.RandomSearch(max_trials=max_trials, **common)
    if kind == "bayesian":
        return keras_tuner.BayesianOptimization(max_trials=max_trials, **common)
    if kind == "hyperband":  # its brackets decide the trials; max_epochs bounds a configuration's training
        return keras_tuner.Hyperband(max_epochs=epochs_per_trial, factor=HYPERBAND_FACTOR, **common)
    raise ConfigError(f"tuner={kind!r} must be one of {TUNERS}.")


def _parses(path: str) -> bool:
    try:
        files.read_json(path)  # a file that cannot be opened is an error of its own, not one cut short
        return True
    except UserError:
        return False


def mend_cut_short_state(output_dir: str, tuner_id: str, holds_oracle: bool, report_only: bool = False) -> str | None:
    """Mends keras-tuner's state in OUTPUT/search after a kill mid-write; returns a note, or None when it is whole.

    keras-tuner writes its JSON files in place, so a kill (or Ctrl-C) between the truncating open and the
    write leaves one empty or cut short, and the resumed search failed with a traceback (a chief waited for
    ever for the worker that could not come back). This process's own tuner file (`tuner_id`.json) always holds
    `{}` (keras-tuner's tuners keep no state of their own): written again. Where the oracle lives
    (`holds_oracle`: one process or the chief), an oracle.json or trial_*/trial.json cut short removes
    oracle.json and the tuner file: the search starts over, and the trials whose runs finished (OUTPUT/runs) are
    read back, not trained again. A worker leaves the chief's files alone. `report_only` (a search that trains
    nothing, so cannot start over): an oracle file cut short is a ConfigError, and nothing is removed.
    """
    project = os.path.join(output_dir, PROJECT)
    tuner_file = os.path.join(project, f"{tuner_id}.json")
    oracle_file = os.path.join(project, "oracle.json")
    oracle_files = [oracle_file, *glob.glob(os.path.join(project, "trial_*", "trial.json"))] if holds_oracle else []
    broken_oracle = [p for p in oracle_files if os.path.isfile(p) and not _parses(p)]
    if broken_oracle and report_only:
        raise ConfigError(
            f"{broken_oracle[0]} was cut short when the search was stopped; run the search without --report_only: "
            "it starts over and reads the finished trials' runs back."
        )
    if broken_oracle:
        for path in (tuner_file, oracle_file):
            if os.path.isfile(path):
                os.remove(path)
        return (
            f"note: {broken_oracle[0]} was cut short when the search was stopped; the search starts over, and the "
            "trials whose runs finished are read back, not trained again."
        )
    if os.path.isfile(tuner_file) and not _parses(tuner_file):
        files.write_text(tuner_file, "{}")
        return f"note: {tuner_file} was cut short when the search was stopped; written again (it holds no state)."
    return None


HYPERBAND_FACTOR = 3


def hyperband_plan(max_epochs: int, factor: int = HYPERBAND_FACTOR) -> tuple[int, int]:
    """(brackets, configurations) of one Hyperband iteration with `max_epochs`, as keras-tuner's HyperbandOracle
    plans it: a bracket per power of `factor` up to max_epochs, bracket b starting ⌈⌈1 + log_f E⌉ / (b + 1) · f^b⌉
    configurations (the later rounds train the best of them longer)."""
    brackets, epochs = 0, float(max_epochs)
    while epochs >= 1:
        epochs /= factor
        brackets += 1
    end_size = math.ceil(1 + math.log(max_epochs, factor))
    return brackets, sum(math.ceil(end_size / (b + 1) * factor**b) for b in range(brackets))


def hyperband_note(max_epochs: int) -> str:
    """What a Hyperband search with --epochs_per_trial=max_epochs will try (--max_trials does not bound it)."""
    brackets, configurations = hyperband_plan(max_epochs)
    note = (
        f"note: hyperband with --epochs_per_trial={max_epochs} tries {configurations} "
        f"configuration{'s' if configurations > 1 else ''} in {brackets} bracket{'s' if brackets > 1 else ''} "
        "(--max_trials bounds random and bayesian only)"
    )
    if brackets == 1:
        wider = HYPERBAND_FACTOR**2
        wider_brackets, wider_configurations = hyperband_plan(wider)
        note += f"; with one bracket none is stopped early: --epochs_per_trial={wider} tries {wider_configurations} "
        note += f"in {wider_brackets}"
    return note + "."


def trial_rows(tuner: keras_tuner.Tuner, base: Config) -> list[dict]:
    """Every completed trial: h, m, n, direct, N, ε_0, validation (and test) perplexity, seconds; best first."""
    rows = []
    for trial in tuner.oracle.trials.values():
        if trial.status != "COMPLETED" or not trial.metrics.exists("val_perplexity"):
            continue
        values = trial.hyperparameters.values
        metric = lambda name: trial.metrics.get_last_value(name) if trial.metrics.exists(name) else None  # noqa: E731
        rows.append(
            {
                "trial": trial.trial_id,
                "hidden_dim": values.get("hidden_dim", base.hidden_dim),
                "feature_dim": values.get("feature_dim", base.feature_dim),
                "order": values.get("order", base.order),
                "direct": bool(values.get("direct", base.direct)),
                "shortlist": int(values.get("shortlist", base.shortlist)),
                "learning_rate": float(values.get("learning_rate", base.learning_rate)),
                "epochs": int(metric("epochs") or 0),
                "valid_perplexity": trial.metrics.get_best_value("val_perplexity"),
                "test_perplexity": metric("test_perplexity"),
                "seconds": metric("seconds"),
            }
        )
    return sorted(rows, key=lambda r: r["valid_perplexity"])


def best_config(rows: list[dict], base: Config) -> Config:
    best = rows[0]
    return dataclasses.replace(
        base,
        hidden_dim=best["hidden_dim"],
        feature_dim=best["feature_dim"],
        order=best["order"],
        direct=best["direct"],
        learning_rate=best.get("learning_rate", base.learning_rate),
        **hypermodel_lib.shortlist_changes(best.get("shortlist", base.shortlist)),
    )


def write_results(output_dir: str, rows: list[dict], base: Config, tuner_kind: str) -> dict:
    if not rows:
        raise ConfigError("the search finished no trial; see the errors above.")
    best = best_config(rows, base)
    files.write_json(os.path.join(output_dir, RESULTS_JSON), {"tuner": tuner_kind, "trials": rows})
    files.write_json(os.path.join(output_dir, BEST_CONFIG), best.to_dict())
    lines = [
        f"# {tuner_kind} search: {len(rows)} trials, best first (validation perplexity)",
        "",
        "| trial | h | m | n | direct | short list | ε_0 | epochs | valid ppl | test ppl | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        test = f"{r['test_perplexity']:.2f}" if r["test_perplexity"] is not None else ""
        listed = f"{r['shortlist']:,} ({base.tail} tail)" if r.get("shortlist") else "all"
        lines.append(
            f"| {r['trial']} | {r['hidden_dim']} | {r['feature_dim']} | {r['order']} | "
            f"{'yes' if r['direct'] else 'no'} | {listed} | {r.get('learning_rate', base.learning_rate):g} | "
            f"{r['epochs']} | "
            f"{r['valid_perplexity']:.2f} | {test} | "
            f"{r['seconds']:.0f} |"
        )
    lines += [
        "",
        f"Best configuration: {BEST_CONFIG} (train it with `python -m nplm_tf.train "
        f"--config_json={os.path.join(output_dir, BEST_CONFIG)} --model_dir=...`).",
    ]
    files.write_text(os.path.join(output_dir, RESULTS_MD), "\n".join(lines) + "\n")
    plot(rows, os.path.join(output_dir, RESULTS_PNG))
    return {"best": rows[0], "best_config": os.path.join(output_dir, BEST_CONFIG), "trials": len(rows)}


def plot(rows: list[dict], path: str) -> None:
    """Validation perplexity over h (x) and m (y): colour and label per trial."""
    # deferred: matplotlib loads when this runs, not with the module
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib loads when this runs, not with the module
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    h = [r["hidden_dim"] for r in rows]
    m = [r["feature_dim"] for r in rows]
    ppl = [r["valid_perplexity"] for r in rows]
    points = ax.scatter(h, m, c=ppl, cmap="viridis_r", s=80, edgecolors="black")
    for x, y, p in zip(h, m, ppl):
        ax.annotate(f"{p:.2f}", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.scatter([h[0]], [m[0]], marker="*", s=300, facecolors="none", edgecolors="red", label="best")
    ax.set_xlabel("hidden units h")
    ax.set_ylabel("word features m")
    ax.set_title("validation perplexity per trial")
    ax.legend(loc="best")
    fig.colorbar(points, ax=ax, label="validation perplexity")
    fig.tight_layout()
    files.replace_atomically(path, fig.savefig)
    plt.close(fig)
