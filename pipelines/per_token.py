"""Per-token scores as `evaluate --per_token` and `ngram --per_token` write them, and a paired comparison.

A file has one line per predicted token: `token<TAB>ln P<TAB>log10 P`, in the order of the text, each
unit (a line of the corpus, a Brown text) ending with `</s>`. `nplm_tf.query`'s output (the network, the
n-gram or their mixture on any text, one unit per line) is read as well. Two models scored on the same text and
vocabulary give the same tokens, so their files can be compared unit by unit: `compare` gives both
perplexities, their ratio, and an interval for the ratio by a paired bootstrap over units (Koehn 2004's
resampling of test sentences, here of the units the models score independently).
"""

from __future__ import annotations

import math

import numpy as np

from pipelines import corpus as corpus_lib
from pipelines import files, tables
from pipelines.errors import UserError
from pipelines.vocabulary import EOS

LN10 = math.log(10)
KINDS = {"per-token": "a per-token file", "query": "`nplm_tf.query`'s output"}


def line(word: str, ln_prob: float) -> str:
    return f"{word}\t{ln_prob:.6f}\t{ln_prob / LN10:.6f}\n"


def write(path: str, words, ln_probs) -> None:
    """The whole file at once, under a temporary name renamed when complete."""
    with files.atomic_output(path) as temporary, open(temporary, "w", encoding="utf-8") as out:
        out.writelines(line(w, float(p)) for w, p in zip(words, ln_probs))


def read(path: str, flag: str) -> tuple[list[str], np.ndarray, str]:
    """(tokens, ln P, kind) of a per-token file (kind "per-token") or of `nplm_tf.query`'s output ("query"), or
    one sentence saying what is wrong.

    `query` prints a line per line of text, `word=id n log10P` per token; its tokens are kept as `word=id`
    (so two models of different vocabularies do not match) and each line's end as `</s>`.
    """
    words, values = [], []
    lines = enumerate(corpus_lib.file_split(path, flag).iter_lines(), start=1)
    for number, text in lines:
        text = text.rstrip("\r\n")
        parts = text.split("\t")
        if parts[-1].startswith("Total: ") or text.startswith("Perplexity including OOVs:"):
            return _read_query(path, number, text, lines, words, values)
        try:
            if len(parts) != 3:
                raise ValueError
            value = float(parts[1])
        except ValueError:
            raise UserError(
                f"{path} line {number} is not token<TAB>ln_prob<TAB>log10_prob; give a file written by "
                "`evaluate --per_token`, `ngram --per_token` or `evaluate --mixture_per_token`, or `query`'s output."
            ) from None
        _append(path, number, parts[0], value, parts[1], words, values)
    return (*_checked(path, words, values), "per-token")


def _append(path, number, word, value, shown, words, values) -> None:
    if not value <= 0.0:  # also NaN
        raise UserError(f"{path} line {number} has ln P = {shown}, which is not a log-probability.")
    words.append(word)
    values.append(value)


def _read_query(path, number, text, lines, words, values) -> tuple[list[str], np.ndarray, str]:
    if words:
        raise UserError(f"{path} line {number} is `query` output after per-token lines; give one kind of file.")
    while not text.startswith("Perplexity including OOVs:"):
        fields = text.split("\t")
        if not fields[-1].startswith("Total: "):
            raise UserError(f"{path} line {number} is not a line of `nplm_tf.query`'s output.")
        for field in fields[:-1]:
            try:
                key, _, log10 = field.rsplit(" ", 2)
                word, id_ = key.rsplit("=", 1)
                value = float(log10) * LN10
                int(id_)
            except ValueError:
                raise UserError(f"{path} line {number} has {field!r}, which is not `word=id n log10P`.") from None
            _append(path, number, EOS if key == f"{EOS}=0" else key, value, log10, words, values)
        number, text = next(lines, (number, "Perplexity including OOVs:"))
        text = text.rstrip("\r\n")
    return (*_checked(path, words, values), "query")


def _checked(path, words, values) -> tuple[list[str], np.ndarray]:
    if not words:
        raise UserError(f"{path} is empty; score some text with --per_token (or `query`) first.")
    if words[-1] != EOS:
        raise UserError(f"{path} does not end with {EOS}: it is cut short (each unit of text ends with {EOS}).")
    return words, np.asarray(values, np.float64)


def check_same_tokens(a: tuple[str, list[str], str], b: tuple[str, list[str], str]) -> None:
    """Two score files (path, tokens, kind) are of one kind and score the same tokens."""
    (path_a, words_a, kind_a), (path_b, words_b, kind_b) = a, b
    if kind_a != kind_b:
        raise UserError(f"{path_a} is {KINDS[kind_a]} and {path_b} {KINDS[kind_b]}; compare two of one kind.")
    for number, (x, y) in enumerate(zip(words_a, words_b), start=1):
        if x != y:
            raise UserError(
                f"{path_a} and {path_b} score different tokens (token {number:,}: {x!r} and {y!r}); score the "
                "same text with models of the same vocabulary (the same --min_count and --max_vocab)."
            )
    if len(words_a) != len(words_b):
        raise UserError(
            f"{path_a} has {len(words_a):,} tokens and {path_b} {len(words_b):,}; score the same text with both."
        )


def read_runs(paths, flag: str, first: tuple[str, list[str], str] | None = None):
    """(first, ln P (runs, tokens)) of score files that are runs of one model, each checked to score the tokens
    of `first` (path, tokens, kind; default: the first of `paths`' own, which is returned)."""
    runs = []
    for path in paths:
        words, values, kind = read(path, flag)
        if first is None:
            first = (path, words, kind)
        else:
            check_same_tokens(first, (path, words, kind))
        runs.append(values)
    return first, np.stack(runs)


def unit_sums(words: list[str], ln_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit (ending at each </s>): the sum of ln P (along the last axis: (units,) or (runs, units)) and the
    number of tokens."""
    ends = np.flatnonzero(np.asarray(words, dtype=object) == EOS)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return np.add.reduceat(ln_probs, starts, axis=-1), (ends - starts + 1).astype(np.float64)


def token_ids(words: list[str], kind: str, index: dict[str, int] | None, vocab_path: str | None) -> np.ndarray:
    """Each token's vocabulary id (most frequent words first, `</s>` 0 and `<unk>` 1): from `index` (word -> id,
    the vocabulary at `vocab_path`) for a per-token file, from the token itself (`word=id`) for `query`'s
    output; or one sentence naming a token the vocabulary lacks."""
    if kind == "query":
        return np.asarray([0 if w == EOS else int(w.rsplit("=", 1)[1]) for w in words], np.int64)
    ids = np.fromiter((index.get(word, -1) for word in words), np.int64, len(words))
    if (missing := np.flatnonzero(ids < 0)).size:
        raise UserError(
            f"token {missing[0] + 1:,} of the scores, {words[missing[0]]!r}, is not a word of {vocab_path}; give "
            "the vocabulary the models scored the text with."
        )
    return ids


def by_band(
    words: list[str],
    ids: np.ndarray,
    baseline: np.ndarray,
    candidate: np.ndarray,
    edges: list[int],
    samples: int,
    seed: int,
) -> list[dict]:
    """`compare` within bands of word frequency: band k holds the tokens whose vocabulary id is at least
    edges[k - 1] (0 for the first) and below edges[k] (no bound for the last). Per band: its tokens and their
    share, both models' perplexities on them, their ratio with its 95% interval (the resamplings of `compare`
    with the same seed: the same units and runs drawn), and `ln_ratio_part`, the band's part of ln(ratio)
    over all tokens: the parts add up to it, so they say where the difference comes from."""
    band = np.searchsorted(np.asarray(edges), ids, side="right")
    rows = []
    for k in range(len(edges) + 1):
        mask = band == k
        tokens = int(mask.sum())
        row = {"ids": [edges[k - 1] if k else 0, edges[k] if k < len(edges) else None], "tokens": tokens}
        row["share"] = tokens / len(words)
        if tokens:
            within = compare(words, baseline, candidate, samples, seed, mask)
            row.update(
                {key: within[key] for key in ("baseline_perplexity", "candidate_perplexity", "ratio", "ratio_95")}
            )
            row["ln_ratio_part"] = math.log(within["ratio"]) * tokens / len(words)
        rows.append(row)
    return rows


def resampled_ratios(
    base_units: np.ndarray, cand_units: np.ndarray, lengths: np.ndarray, samples: int, seed: int
) -> np.ndarray:
    """`compare`'s `samples` resampled perplexity ratios, from each model's per-unit sums of ln P (runs, units)
    and the units' token counts: units drawn with replacement, the same for both models, and each model's runs
    drawn with replacement, independently."""
    rng = np.random.default_rng(seed)
    units = lengths.size

    def runs_drawn(per_run):
        """The mean of R runs drawn with replacement, its distance from the R runs' own mean scaled by
        sqrt(R / (R - 1)): a draw's mean varies by the runs' variance over R with the divisor R, (R - 1)/R of
        the unbiased one, and the scaling restores it (Davison and Hinkley 1997, section 3.3's adjusted
        residuals). One run needs no draw: the resamplings of units are then as they always were."""
        runs = per_run.size
        if runs == 1:
            return per_run[0]
        center = per_run.mean()
        return center + math.sqrt(runs / (runs - 1)) * (per_run[rng.integers(0, runs, runs)].mean() - center)

    ratios = np.empty(samples)
    for s in range(samples):  # unit counts per resampling: memory of one resampling, whatever the number
        weights = np.bincount(rng.integers(0, units, units), minlength=units)
        base, cand = runs_drawn(base_units @ weights), runs_drawn(cand_units @ weights)
        ratios[s] = math.exp((base - cand) / (weights @ lengths))
    return ratios


def compare(
    words: list[str],
    baseline: np.ndarray,
    candidate: np.ndarray,
    samples: int,
    seed: int,
    mask: np.ndarray | None = None,
) -> dict:
    """Perplexities of two models on the same tokens, and the candidate's perplexity over the baseline's with
    the 2.5% and 97.5% quantiles of that ratio over `samples` resamplings of the units, with replacement.

    `baseline` and `candidate` hold ln P per token, (tokens,) for one run of a model or (runs, tokens) for
    several (training seeds, say). A model of several runs is their geometric mean: its perplexity is the
    exponential of the mean over runs and tokens of -ln P. Each resampling then also draws each model's runs
    with replacement, independently of the other model's and of the units: the units are crossed with the
    runs, not nested in them (Owen 2007's "pigeonhole" bootstrap), so the interval covers both the choice
    of test text and the run-to-run spread of training; a draw's distance from the runs' mean is scaled by
    sqrt(R / (R - 1)), so that its variance is the runs' unbiased one. One run a model resamples the units
    alone.

    `mask` (tokens,) bool: compare on these tokens only, each kept in its unit (`by_band`); a resampling of
    units that holds none of them has no ratio and is left out of the interval (null when every one is).
    """
    baseline, candidate = np.atleast_2d(baseline), np.atleast_2d(candidate)  # (runs, tokens)
    if mask is not None:
        baseline, candidate = np.where(mask, baseline, 0.0), np.where(mask, candidate, 0.0)
    base_units, lengths = unit_sums(words, baseline)  # (runs, units)
    cand_units, _ = unit_sums(words, candidate)
    if mask is not None:
        lengths = unit_sums(words, mask.astype(np.float64))[0]
    base_totals, cand_totals = baseline.sum(axis=1), candidate.sum(axis=1)  # each run's sum of ln P
    tokens = lengths.sum()
    ratio = math.exp((base_totals.mean() - cand_totals.mean()) / tokens)
    with np.errstate(invalid="ignore"):  # 0 / 0: a resampling without a masked token
        ratios = resampled_ratios(base_units, cand_units, lengths, samples, seed)
    drawn = ratios[np.isfinite(ratios)]
    return {
        "tokens": int(tokens),
        "units": int(lengths.size),
        "baseline_runs": len(base_totals),
        "candidate_runs": len(cand_totals),
        "baseline_perplexity": math.exp(-base_totals.mean() / tokens),
        "candidate_perplexity": math.exp(-cand_totals.mean() / tokens),
        "baseline_perplexity_runs": [math.exp(-total / tokens) for total in base_totals],
        "candidate_perplexity_runs": [math.exp(-total / tokens) for total in cand_totals],
        "ratio": ratio,
        "ratio_95": [float(q) for q in np.quantile(drawn, [0.025, 0.975])] if drawn.size else None,
        "candidate_better_share": float(np.mean(ratios < 1.0)),
        "units_candidate_better": int(np.sum(cand_units.mean(axis=0) > base_units.mean(axis=0))),
        "samples": samples,
        "seed": seed,
    }


def summary_table(result: dict) -> str:
    """`nplm_tf.compare`'s result as a person reads it: each model's perplexity, the ratio with its interval, per band."""

    def interval(row: dict) -> str:
        low_high = row.get("ratio_95")
        return f"{low_high[0]:.3f}–{low_high[1]:.3f}" if low_high else "n/a"

    def line(name: str, row: dict, tokens: int) -> list[str]:
        if "ratio" not in row:  # a band without tokens
            return [name, "0", "", "", "", ""]
        ratio = row["ratio"]
        return [
            name,
            f"{tokens:,}",
            f"{row['baseline_perplexity']:.2f}",
            f"{row['candidate_perplexity']:.2f}",
            f"{ratio:.3f}",
            interval(row),
        ]

    rows = [line("all tokens", result, result["tokens"])]
    for band in result.get("bands", []):
        first, end = band["ids"]
        rows.append(line(f"ids {first}–{end - 1 if end else 'end'}", band, band["tokens"]))
    header = ["tokens", "count", "baseline ppl", "candidate ppl", "ratio", "95% interval"]
    share = result["candidate_better_share"]
    return (
        tables.text_table(header, rows)
        + f"\n{result['units']:,} units, {result['samples']:,} resamplings; the candidate is better in {share:.1%} "
        "of them (--format=json: every figure)"
    )
