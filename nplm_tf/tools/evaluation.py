"""What `nplm_tf.evaluate` computes, without its flags: a network's exact perplexity (and its mixture with an
n-gram), an ensemble's, an nplm toolkit model's, and the tables a person reads them in."""

from __future__ import annotations

import contextlib
import math

import numpy as np

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import network_mixture
from nplm_tf.inference import nplm_format
from nplm_tf.network import loading
from nplm_tf.tools import ensemble
from nplm_tf.training.data import eval_dataset
from pipelines import corpus as corpus_lib
from pipelines import files, per_token, tables


def score_network(
    model_dir: str,
    corpus: corpus_lib.Corpus,
    split: corpus_lib.Split,
    ngram_dir: str | None = None,
    per_token_path: str | None = None,
    mixture_per_token: str | None = None,
    precision: str | None = None,
    progress: bool = False,
) -> tuple[dict, dict | None]:
    """(summary, the mixture's fit or None): the network of `model_dir` on `split`, its perplexity, tokens and
    OOV rate; with `ngram_dir` also its mixtures, weights fitted on `corpus`'s valid split. `per_token_path`
    gets the network's ln P per token, `mixture_per_token` the mixture's; each written whole or not at all."""
    # deferred: TensorFlow loads when this runs, not with the module
    from nplm_tf.network import scoring

    config, vocab, model = loading.load_trained(model_dir, precision)
    nll_parts = []  # kept for the mixture, so the split is scored once
    with contextlib.ExitStack() as stack:
        out = None
        if per_token_path:  # written under a temporary name, renamed once complete
            out = stack.enter_context(
                open(stack.enter_context(files.atomic_output(per_token_path)), "w", encoding="utf-8")
            )

        def on_batch(targets, nll):
            if out:
                for target, value in zip(targets, nll):
                    out.write(per_token.line(vocab.words[target], -value))
            if ngram_dir:
                nll_parts.append(nll)

        result = scoring.score(
            model,
            eval_dataset(split, vocab, config, model.head),
            vocab.unk_id,
            on_batch=on_batch if out or ngram_dir else None,
            progress=progress,
        )
    summary = {"perplexity": result.perplexity, "tokens": result.tokens, "oov_rate": result.oov_rate}
    if not ngram_dir:
        return summary, None
    ngram = ngram_lib.load(ngram_dir)
    valid_probs = scoring.token_probabilities(model, eval_dataset(corpus["valid"], vocab, config, model.head), progress)
    probs = {"valid": valid_probs, "eval": np.exp(-np.concatenate(nll_parts))}
    splits = {"valid": corpus["valid"], "eval": split}
    report = network_mixture.fit_and_score(probs, splits, vocab, ngram, ngram_dir, "eval", mixture_per_token)
    fit = report.pop("fit")
    summary["mixture"] = report
    return summary, fit


def score_nplm(path: str, split: corpus_lib.Split, per_token_path: str | None = None) -> dict:
    """Exact perplexity of an nplm toolkit model file on `split`, in NumPy."""
    model = nplm_format.NplmModel.read(path)
    lines = [tokens for tokens in (corpus_lib.tokenize(line) for line in split.iter_lines()) if tokens]
    ln_p, seen, unknown = model.line_log_probs(lines)
    if per_token_path:
        with files.atomic_output(per_token_path) as tmp, open(tmp, "w", encoding="utf-8") as out:
            out.writelines(per_token.line(word, value) for word, value in zip(seen, ln_p))
    return {"perplexity": math.exp(-float(ln_p.mean())), "tokens": int(ln_p.size), "oov_rate": unknown / ln_p.size}


def score_ensemble(members: ensemble.Members, corpus, split, per_token_path: str | None = None) -> tuple[dict, dict]:
    """(report, fit): the ensemble's members, weights fitted on `corpus`'s valid split and perplexities on
    `split`; `per_token_path` gets its ln P per token."""
    report, probs, ids = ensemble.fit_and_score(members, corpus["valid"], split)
    fit = report.pop("fit")
    if per_token_path:
        per_token.write(per_token_path, (members.vocab.words[i] for i in ids), np.log(probs))
    return report, fit


def ensemble_table(report: dict) -> str:
    """`score_ensemble`'s report as a person reads it on a terminal."""
    rows = [[m["model"], f"{m['perplexity']:.2f}", ""] for m in report["members"]]
    rows.append(["uniform weights", f"{report['uniform']['perplexity']:.2f}", ""])
    em = report["em"]
    rows.append(["weights by EM on valid", f"{em['perplexity']:.2f}", " ".join(f"{w:.3f}" for w in em["weights"])])
    if "context_frequency" in report:
        rows.append(["weights per context frequency", f"{report['context_frequency']['perplexity']:.2f}", ""])
    return tables.text_table(["model", "perplexity", "weights"], rows, right=[False, True, False])


def summary_table(summary: dict) -> str:
    """`score_network`'s (or `score_nplm`'s) summary as a person reads it on a terminal."""
    rows = [["network", f"{summary['perplexity']:.2f}", ""]]
    mixture = summary.get("mixture")
    if mixture:
        rows += [
            [f"n-gram (order {mixture['ngram_order']})", f"{mixture['ngram_perplexity']:.2f}", ""],
            ["mixture, λ = 0.5", f"{mixture['fixed_0.5']['perplexity']:.2f}", "0.5"],
            ["mixture, λ by EM on valid", f"{mixture['em']['perplexity']:.2f}", f"{mixture['em']['weight']:.3f}"],
            [
                "mixture, λ per context frequency",
                f"{mixture['context_frequency']['perplexity']:.2f}",
                " ".join(f"{w:.2f}" for w in mixture["context_frequency"]["weights"]),
            ],
        ]
    table = tables.text_table(["model", "perplexity", "λ (network's weight)"], rows, right=[False, True, False])
    return f"{table}\n\n{summary['tokens']:,} predicted tokens, OOV rate {summary['oov_rate']:.2%}"
