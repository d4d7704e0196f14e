"""The best model of a corpus in one command: an ensemble of networks from the shipped recipe, mixed with KN5.

    python -m nplm_tf.reproduce --best --output=runs/best

The recipe is `configs/brown_best.json` (a `train --config_json` file: the best single network) and `MEMBERS`,
the networks the ensemble trains from it (each the configuration with a few fields changed). OUTPUT/kn5 holds
the modified Kneser-Ney 5-gram, OUTPUT/<member> each network (a normal `nplm_tf.train` directory), so a
rerun trains only what is missing. The ensemble's weights are fitted on valid by EM, per context-frequency
bucket with the n-gram (`tools.ensemble`): OUTPUT/ensemble.json keeps the fit of every network and KN5, which
`export --ensemble` and `nplm_tf.LanguageModel` read. OUTPUT/best.md and best.json list each model's test
perplexity, the networks' ensemble, the ensemble with KN5, and KN5 and the ensemble each with caches of the
text so far (`baselines.cache`: a unigram model of the Brown text's words so far, which no served model keeps),
each against KN5 with the paired interval over the test units, and the time every part took. After each
network it trains it prints how long the networks still to train will take, at the mean time of those it
trained.
"""

from __future__ import annotations

import os
import time

import numpy as np

from nplm_tf.core.config import Config
from nplm_tf.experiments import table1
from nplm_tf.tools import ensemble
from pipelines import corpus as corpus_lib
from pipelines import files, per_token

# The ensemble's networks: a name and the fields that differ from the recipe's configuration. Each sees a
# context of another length (the recipe's n is 13), so they err differently; alone, each longer context did
# better on valid (`benchmarks/README.md`, "The best Brown model", measures each and their ensembles).
MEMBERS = (
    ("net_n7", {"order": 7, "seed": 3}),
    ("net_n9", {"order": 9, "seed": 7}),
    ("net_n11", {"order": 11, "seed": 8}),
    ("net_n13", {}),
)
# Caches of the text so far (`baselines.cache`) that the last rows mix in, one a decay: EM weighs a short
# memory against a long one (`benchmarks/README.md`, "The best Brown model", measures them).
CACHE_DECAYS = (0.99, 0.999, 1.0)
ENSEMBLE_FILE = "ensemble.json"
TOKENS_FILE = table1.TOKENS_FILE


def members(base: Config, seeds: list[int]) -> list[tuple[str, Config]]:
    """The networks to train: `MEMBERS` over `base`, or with `seeds` one `base` network per seed."""
    if seeds:
        return [(f"net_seed{seed}", base.replace(seed=seed)) for seed in seeds]
    return [(name, base.replace(**changes)) for name, changes in MEMBERS]


def network_row(output_dir: str, corpus: corpus_lib.Corpus, name: str, config: Config) -> dict:
    """Trains the member (or finds it trained) and its row: valid and test perplexity, training seconds."""
    # deferred: TensorFlow loads when this runs, not with the module
    from nplm_tf.training import trainer

    path = os.path.join(output_dir, name)
    start = time.perf_counter()
    metrics = trainer.train_and_evaluate(config, path, corpus, export=False)  # a finished run is left as it is
    return {
        "name": name,
        "n": config.order,
        "h": config.hidden_dim,
        "m": config.feature_dim,
        "direct": config.direct,
        "dropout": config.dropout,
        "seed": config.seed,
        "dir": path,
        "valid": metrics["valid_perplexity"],
        "test": metrics["test_perplexity"],
        "train_seconds": metrics.get("train_seconds"),
        "seconds_here": time.perf_counter() - start,
        "test_tokens": os.path.join(path, TOKENS_FILE),
    }


def ensemble_rows(output_dir: str, corpus: corpus_lib.Corpus, networks: list[dict], kn5: dict) -> list[dict]:
    """The networks' ensemble (EM weights), the ensemble with KN5 (weights per context frequency, as every row
    below), KN5 with caches of the text so far (`CACHE_DECAYS`) and the networks with KN5 and the caches, each
    model scored once per split; the networks and KN5's fit saved as OUTPUT/ensemble.json (what a served model
    can hold: no cache)."""
    start = time.perf_counter()
    members = ensemble.Members.load([r["dir"] for r in networks], [kn5["dir"]], CACHE_DECAYS)
    valid, test = members.score(corpus["valid"]), members.score(corpus["test"])
    words = [members.vocab.words[i] for i in test[2]]
    for j, row in enumerate(networks):  # each network's own per-token file, for the intervals
        if not os.path.isfile(row["test_tokens"]):
            per_token.write(row["test_tokens"], words, np.log(test[0][j]))
    k, caches = len(networks), [i for i, kind in enumerate(members.kinds) if kind == "cache"]
    rows = []
    for name, keep, key, label in (
        ("ensemble of the networks", list(range(k)), "em", "networks"),
        ("the networks and KN5", list(range(k + 1)), "context_frequency", "ensemble"),
        ("KN5 and the cache", [k, *caches], "context_frequency", "kn5_cache"),
        ("the networks, KN5 and the cache", None, "context_frequency", "ensemble_cache"),
    ):
        report, probs, _ = ensemble.fit_scored(members, valid, test, keep)
        tokens = os.path.join(output_dir, f"{label}_{TOKENS_FILE}")
        per_token.write(tokens, words, np.log(probs))
        rows.append(
            {
                "name": name,
                "dir": output_dir,
                "valid": None,
                "test": report[key]["perplexity"],
                "weights": report["em"]["weights"],
                "test_tokens": tokens,
            }
        )
        if label == "ensemble":
            ensemble.save_fit(os.path.join(output_dir, ENSEMBLE_FILE), report["fit"])
    rows[-1]["seconds_here"] = time.perf_counter() - start
    return rows


def _trained_here(networks: list[dict]) -> list[float]:
    """The seconds of the networks this run trained (a network found finished on disk takes only its reading)."""
    return [r["seconds_here"] for r in networks if r["seconds_here"] >= 0.5 * (r["train_seconds"] or 0) > 0]


def remaining(networks: list[dict], left: int) -> str:
    """A line on the time the networks still to train will take, from those this run trained, or nothing where
    there is no such network or none is left."""
    trained = _trained_here(networks)
    if not trained or not left:
        return ""
    minutes = left * sum(trained) / len(trained) / 60
    last = networks[-1]
    took = f"{last['name']} took {last['seconds_here'] / 60:.1f} minutes"
    return f"{took}; {left} to go, about {minutes:.0f} minutes more\n"


def within_budget(networks: list[dict], used: float, budget: float | None) -> str | None:
    """None while another network fits in `budget` seconds (`used` spent so far; at least one network always
    trains), else the line that says why training stops: the next network would take about what the last one
    this run trained took."""
    if budget is None or not networks:
        return None
    trained = _trained_here(networks)
    next_one = sum(trained) / len(trained) if trained else 0.0
    if used + next_one <= budget:
        return None
    return (
        f"budget: {used / 60:.0f} of {budget / 60:.0f} minutes used, and the next network would take about "
        f"{next_one / 60:.0f} more: the ensemble keeps the {len(networks)} trained\n"
    )


def run_recipe(
    output_dir: str, corpus: corpus_lib.Corpus, base: Config, seeds: list[int], budget: float | None = None
) -> dict:
    """The recipe's rows. With `budget` (seconds), networks train, the most valuable first (the recipe's own
    longest context, then the shorter ones), while the next one fits in what is left; at least one does."""
    start = time.perf_counter()
    kn5 = table1.ngram_row(output_dir, corpus, base, table1.NGRAMS[-1])
    kn5["seconds_here"] = time.perf_counter() - start
    networks, todo = [], members(base, seeds)
    if budget is not None:
        todo = todo[::-1]
    for i, (name, config) in enumerate(todo):
        stop = within_budget(networks, time.perf_counter() - start, budget)
        if stop:
            print(stop, end="", flush=True)
            break
        print(
            f"{name}: n={config.order}, h={config.hidden_dim}, m={config.feature_dim}, seed={config.seed}", flush=True
        )
        networks.append(network_row(output_dir, corpus, name, config))
        print(remaining(networks, len(todo) - i - 1), end="", flush=True)
        if budget is not None:
            used = time.perf_counter() - start
            print(f"budget: {used / 60:.0f} of {budget / 60:.0f} minutes used, {max(budget - used, 0) / 60:.0f} left")
    rows = networks + ensemble_rows(output_dir, corpus, networks, kn5) + [kn5]
    for r in rows:
        r["ratio_to_kn5"] = r["test"] / kn5["test"]
    table1.add_intervals(rows)
    return {"rows": rows, "seconds": time.perf_counter() - start, "config": base.to_dict()}


def write(output_dir: str, result: dict, command: str) -> None:
    files.write_json(os.path.join(output_dir, "best.json"), {"command": command, **result})
    fmt = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
    lines = [
        "| model | n | h | m | seed | valid | test | test / KN5 | training s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        shape = [str(r[k]) if r.get(k) is not None else "" for k in ("n", "h", "m", "seed")]
        seconds = r.get("train_seconds")
        lines.append(
            f"| {r['name']} | {' | '.join(shape)} | {fmt(r.get('valid'))} | {fmt(r['test'])} | "
            f"{r['ratio_to_kn5']:.3f}{table1.interval(r)} | {'' if seconds is None else f'{seconds:.0f}'} |"
        )
    lines += [
        "",
        f"Made by `{command}` in {result['seconds'] / 60:.1f} minutes (this run; a resumed run counts only what "
        "it did). Ensemble weights fitted on valid: by EM for the networks, per context-frequency bucket with "
        f"KN5 (`{ENSEMBLE_FILE}`, which `nplm_tf.export --ensemble` and `nplm_tf.LanguageModel` read). The cache: "
        f"unigram models of the text so far, decays {', '.join(f'{d:g}' for d in CACHE_DECAYS)} (evaluation only: "
        "no served model keeps the text so far). In brackets: the 95% interval of the ratio over resamplings of "
        "the test split's units, paired with KN5.",
    ]
    files.write_text(os.path.join(output_dir, "best.md"), "\n".join(lines) + "\n")
