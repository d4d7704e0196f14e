"""The paper's Table 1 comparison on one corpus: networks alone and mixed, n-gram baselines.

OUTPUT/<row>/ holds each model (a normal `nplm_tf.train` or `nplm_tf.ngram`
directory), so a rerun skips every finished row. OUTPUT/table.md,
table.json and curves.png are rewritten from them at the end.
"""

from __future__ import annotations

import dataclasses
import math
import os

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import network_mixture
from nplm_tf.core import run_dir
from nplm_tf.core.config import Config
from nplm_tf.experiments import curves
from nplm_tf.network import loading, scoring
from nplm_tf.training import trainer
from nplm_tf.training.data import eval_dataset
from pipelines import corpus as corpus_lib
from pipelines import files, per_token


@dataclasses.dataclass(frozen=True)
class Row:
    name: str  # the paper's name; the mixed row is the next MLP number
    order: int  # n
    hidden_dim: int  # h
    feature_dim: int  # m
    direct: bool
    paper_test: int  # the paper's test perplexity, alone
    paper_mixed: int  # ... and mixed with the interpolated trigram


# Bengio et al. (2003), Table 1, Brown. Only MLP9 (276), MLP10 (252) and the
# Kneser-Ney 5-gram (321) are confirmed by the project's benchmark protocol;
# the other paper numbers are quoted from the paper's table and marked in the output.
ROWS = (
    Row("MLP1", 5, 50, 60, True, 268, 257),
    Row("MLP3", 5, 0, 60, True, 310, 272),
    Row("MLP5", 5, 50, 30, True, 279, 259),
    Row("MLP7", 3, 50, 30, True, 293, 270),
    Row("MLP9", 5, 100, 30, False, 276, 252),
)
QUICK_ROWS = ("MLP7", "MLP9")
CONFIRMED = {"MLP9", "MLP10", "Kneser-Ney 5-gram"}
NGRAMS = (  # name, directory, order, smoothing, paper test
    ("interpolated trigram", "interp3", 3, "interpolated", 336),
    ("Kneser-Ney 3-gram", "kn3", 3, "kneser_ney", 323),
    ("Kneser-Ney 4-gram", "kn4", 4, "kneser_ney", 321),
    ("Kneser-Ney 5-gram", "kn5", 5, "kneser_ney", 321),
)
ROW_FILE = "reproduce_row.json"
TOKENS_FILE = "test_tokens.tsv"  # a row's ln P per test token (`pipelines.per_token`), for the interval against KN5
MIXED_TOKENS_FILE = "mixed_test_tokens.tsv"


def ngram_row(output_dir: str, corpus: corpus_lib.Corpus, base: Config, spec) -> dict:
    name, sub, order, smoothing, paper = spec
    path = os.path.join(output_dir, sub)
    metrics = run_dir.RunDir(path).read_metrics()
    tokens = os.path.join(path, TOKENS_FILE)
    if metrics is None:
        metrics = ngram_lib.train_ngram(
            order,
            path,
            corpus,
            base.min_count,
            arpa=False,
            smoothing=smoothing,
            max_vocab=base.max_vocab,
            per_token=tokens,
        )
    return {
        "name": name,
        "n": order,
        "h": None,
        "m": None,
        "direct": None,
        "mix": False,
        "dir": path,
        "train": metrics["train_perplexity"],
        "valid": metrics["valid_perplexity"],
        "test": metrics["test_perplexity"],
        "paper_test": paper,
        "test_tokens": tokens,
    }


def network_rows(
    output_dir: str,
    corpus: corpus_lib.Corpus,
    base: Config,
    row: Row,
    trigram_dir: str,
    train_perplexity: bool,
    seeds: list[int] | None = None,
) -> list[dict]:
    """The network alone and mixed with the trigram (context-frequency weights fitted on valid), trained once
    per seed of `seeds` (default: the base config's alone). With several seeds each row holds their geometric
    mean (`pooled`), each seed's run in a directory of its own: the base config's seed in OUTPUT/<row>, as
    without seeds, so that a finished table gains seeds without training its first run again."""
    seeds = seeds or [base.seed]
    runs = [
        _seed_rows(
            seed_dir(output_dir, row, seed, base.seed),
            corpus,
            base.replace(seed=seed),
            row,
            trigram_dir,
            train_perplexity,
        )
        for seed in seeds
    ]
    if len(runs) == 1:
        return runs[0]
    return [pooled([run[i] for run in runs], seeds) for i in range(2)]


def seed_dir(output_dir: str, row: Row, seed: int, base_seed: int) -> str:
    name = row.name.lower()
    return os.path.join(output_dir, name if seed == base_seed else f"{name}_seed{seed}")


def pooled(runs: list[dict], seeds: list[int]) -> dict:
    """One row for the runs of one network with different seeds: the geometric mean of their perplexities (the
    exponential of the mean -ln P over runs and tokens, as `compare` pools runs), each seed's test beside it,
    and the first seed's curves."""

    def geometric_mean(key):
        return math.exp(sum(math.log(r[key]) for r in runs) / len(runs))

    return {
        **runs[0],
        "train": geometric_mean("train"),
        "valid": geometric_mean("valid"),
        "test": geometric_mean("test"),
        "seeds": list(seeds),
        "test_runs": [r["test"] for r in runs],
        "dir": [r["dir"] for r in runs],
        "test_tokens": [r["test_tokens"] for r in runs],
    }


def _seed_rows(
    path: str, corpus: corpus_lib.Corpus, config: Config, row: Row, trigram_dir: str, train_perplexity: bool
) -> list[dict]:
    cached = os.path.join(path, ROW_FILE)
    if os.path.isfile(cached) and run_dir.RunDir(path).read_metrics() is not None:
        return files.read_json(cached)
    config = dataclasses.replace(
        config, order=row.order, hidden_dim=row.hidden_dim, feature_dim=row.feature_dim, direct=row.direct
    )
    metrics = trainer.train_and_evaluate(config, path, corpus, export=False)
    _, vocab, model = loading.load_trained(path)
    train = float("nan")
    if train_perplexity:
        train = scoring.score(model, eval_dataset(corpus["train"], vocab, config, model.head), vocab.unk_id).perplexity
    probs = {
        name: scoring.token_probabilities(model, eval_dataset(corpus[name], vocab, config, model.head))
        for name in ("valid", "test")
    }
    tokens = {"network": os.path.join(path, TOKENS_FILE), "mixed": os.path.join(path, MIXED_TOKENS_FILE)}
    ngram_lib.write_per_token(tokens["network"], vocab, ngram_lib.token_arrays(corpus["test"], vocab), probs["test"])
    mixed = {}
    trigram = network_mixture.load_checked(vocab, trigram_dir)
    for name in ("valid", "test"):  # the weights are always fitted on valid
        report = network_mixture.fit_and_score(
            {"valid": probs["valid"], "eval": probs[name]},
            {"valid": corpus["valid"], "eval": corpus[name]},
            vocab,
            trigram,
            trigram_dir,
            "eval",
            per_token=tokens["mixed"] if name == "test" else None,
        )
        network_mixture.save_fit(path, report)
        mixed[name] = report["context_frequency"]["perplexity"]
    shape = {"n": row.order, "h": row.hidden_dim, "m": row.feature_dim, "direct": row.direct, "dir": path}
    rows = [
        {
            "name": row.name,
            **shape,
            "mix": False,
            "train": train,
            "valid": metrics["valid_perplexity"],
            "test": metrics["test_perplexity"],
            "paper_test": row.paper_test,
            "curve": [e["valid_perplexity"] for e in metrics["epochs"]],
            "loss_curve": [point for e in metrics["epochs"] for point in e.get("loss_curve", [])],
            "test_tokens": tokens["network"],
        },
        {
            "name": f"MLP{int(row.name[3:]) + 1}",
            **shape,
            "mix": True,
            "train": float("nan"),
            "valid": mixed["valid"],
            "test": mixed["test"],
            "paper_test": row.paper_mixed,
            "test_tokens": tokens["mixed"],
        },
    ]
    files.write_json(cached, rows)
    return rows


def protocol(corpus_name: str, min_count: int, max_vocab: int = 0) -> str:
    """The data protocol in words, for a table a user keeps (it names no path outside the output)."""
    if corpus_name == "brown":
        data = (
            "Brown corpus (NLTK's brown.zip, the 500 texts in name order, each text one unit ending in </s>), "
            "split by running token count: train while below 800,000, valid while below 1,000,000, test the "
            "rest (800,571 / 199,995 / 161,126 predicted tokens)"
        )
    else:
        data = f"corpus '{corpus_name}' as given by its train, valid and test files (each line one unit)"
    most = f" (at most {max_vocab:,} types in all, the most frequent)" if max_vocab else ""
    return (
        f"Data: {data}. Vocabulary: the words seen at least {min_count} times in train, plus </s> and "
        f"<unk>{most}. Perplexity: every predicted token including </s> and <unk>, probabilities exactly normalized "
        "over the vocabulary."
    )


BOOTSTRAP_SAMPLES = 1000


def add_intervals(rows: list[dict]) -> None:
    """Each row's `ratio_to_kn5_95`: its test perplexity over KN5's, 95% interval by a paired bootstrap over the
    test units, where both rows kept their per-token file (rows made before these files were kept have none)."""
    kn5 = next((r for r in rows if r["name"] == "Kneser-Ney 5-gram"), None)
    if kn5 is None or not os.path.isfile(kn5.get("test_tokens") or ""):
        return
    first, baseline = per_token.read_runs([kn5["test_tokens"]], "test_tokens")
    for r in rows:
        paths = r.get("test_tokens") or []
        paths = [paths] if isinstance(paths, str) else paths  # a row of several seeds: a file per seed
        if paths and all(os.path.isfile(p) for p in paths):
            _, runs = per_token.read_runs(paths, "test_tokens", first)
            # Several seeds: the resamplings draw the seeds' runs too (`per_token.compare`).
            result = per_token.compare(first[1], baseline, runs, BOOTSTRAP_SAMPLES, seed=0)
            r["ratio_to_kn5_95"] = result["ratio_95"]


def interval(row: dict) -> str:
    low_high = row.get("ratio_to_kn5_95")
    return f" ({low_high[0]:.3f}–{low_high[1]:.3f})" if low_high else ""


def write_table(output_dir: str, rows: list[dict], command: str, seconds: float, protocol_text: str = "") -> None:
    kn5 = next((r["test"] for r in rows if r["name"] == "Kneser-Ney 5-gram"), float("nan"))
    for r in rows:
        r["ratio_to_kn5"] = r["test"] / kn5
    add_intervals(rows)
    files.write_json(os.path.join(output_dir, "table.json"), {"command": command, "seconds": seconds, "rows": rows})
    fmt = lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"  # noqa: E731
    lines = [
        "| model | n | h | m | direct | mix | train | valid | test | test / KN5 | paper test |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = [
            "" if r[k] is None else ("yes" if r[k] is True else "no" if r[k] is False else str(r[k]))
            for k in ("n", "h", "m", "direct")
        ]
        paper = f"{r['paper_test']}" + ("" if r["name"] in CONFIRMED else " †")
        lines.append(
            f"| {r['name']} | {' | '.join(shape)} | {'yes' if r['mix'] else 'no'} | {fmt(r['train'])} | "
            f"{fmt(r['valid'])} | {fmt(r['test'])} | {r['ratio_to_kn5']:.3f}{interval(r)} | {paper} |"
        )
    lines += [
        "",
        f"Made by `{command}` in {seconds / 60:.1f} minutes. Mixed rows: the network above with the "
        "interpolated trigram, one weight per context-frequency bucket fitted on valid (their valid column "
        "is therefore in-sample). Paper numbers use the paper's own Brown split and 16,383-word "
        "vocabulary: compare ratios, not values. † quoted from the paper's Table 1; the paper's figures "
        "for MLP9, MLP10 and the Kneser-Ney 5-gram are the ones this project's protocol document confirms. "
        f"In brackets: the 95% interval of the ratio over {BOOTSTRAP_SAMPLES:,} resamplings of the test split's "
        "units (its lines; Brown's texts), paired with the Kneser-Ney 5-gram (`nplm_tf.compare`).",
        *([seeds_note(rows)] if any(r.get("seeds") for r in rows) else []),
        *(["", protocol_text] if protocol_text else []),
    ]
    files.write_text(os.path.join(output_dir, "table.md"), "\n".join(lines) + "\n")
    curves.plot_curves(rows, os.path.join(output_dir, "curves.png"))


def seeds_note(rows: list[dict]) -> str:
    seeds = next(r["seeds"] for r in rows if r.get("seeds"))
    return (
        f"Network rows: the geometric mean of {len(seeds)} runs, seeds {', '.join(map(str, seeds))} (each run's test "
        "perplexity is in table.json); their intervals resample the runs as well as the units, and the curves are "
        "the first seed's."
    )
