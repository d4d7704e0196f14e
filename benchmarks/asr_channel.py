"""The ASR spelling and the noisy channel of `benchmarks.ctc_decoding` (no flags here: tests import it)."""

from __future__ import annotations

import random
import re

LABELS = ["", " ", *"abcdefghijklmnopqrstuvwxyz", "'"]
# Letters that sound alike (a coarse phonetic grouping): a confused character is heard as one of them.
CONFUSABLE = {}
for group in ("aeiou", "bp", "dt", "gkc", "mn", "fv", "sz", "lr", "wv", "yi", "jg", "qk", "xs", "h'"):
    for letter in group:
        CONFUSABLE.setdefault(letter, set()).update(c for c in group if c != letter)
CONFUSABLE = {k: sorted(v) for k, v in CONFUSABLE.items()}


def normalize(line: str) -> str:
    """The ASR spelling: lower case, letters and apostrophes, words one space apart."""
    words = (re.sub(r"[^a-z']", "", token.lower()) for token in line.split())
    return " ".join(w for w in words if w.strip("'"))


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r" [.?!] ", f" {text} ") if s.strip()]


def emissions(text: str, rng: random.Random, noise: float, spread: float, frames: int):
    """The channel's (frames, labels) log-posteriors of `text` (the channel `benchmarks.ctc_decoding`'s docstring states)."""
    import numpy as np

    rows = []
    for char in text:
        row = np.full(len(LABELS), 1e-4)
        alike = CONFUSABLE.get(char, [])
        if char != " " and alike and rng.random() < noise:
            heard = rng.choice(alike)
            row[LABELS.index(heard)] = 0.55
            row[LABELS.index(char)] = 0.35
        else:
            row[LABELS.index(char)] = 1.0 - (spread if alike else 0.0)
            for other in alike:
                row[LABELS.index(other)] += spread / len(alike)
        rows += [row / row.sum()] * frames
        blank = np.full(len(LABELS), 1e-4)
        blank[0] = 1.0
        rows.append(blank / blank.sum())
    return np.log(np.array(rows, dtype=np.float32))


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference words) of one utterance, by jiwer's alignment."""
    import jiwer

    out = jiwer.process_words(reference, hypothesis)
    return out.substitutions + out.deletions + out.insertions, len(reference.split())


def paired_wer_difference(errors_a, errors_b, words, rounds: int = 2000, seed: int = 0) -> dict:
    """WER(a) − WER(b) over the same utterances, and its 95% interval by the paired bootstrap over utterances
    (Bisani and Ney, 2004): each round draws the utterances with replacement and takes both decoders' errors
    on the same draw. An interval that holds 0 is a difference the test set cannot tell from none."""
    import numpy as np

    a, b, n = (np.asarray(x, np.float64) for x in (errors_a, errors_b, words))
    draws = np.random.default_rng(seed).integers(0, len(n), size=(rounds, len(n)))
    differences = (a[draws].sum(axis=1) - b[draws].sum(axis=1)) / n[draws].sum(axis=1)
    low, high = np.percentile(differences, [2.5, 97.5])
    return {"difference": float((a.sum() - b.sum()) / n.sum()), "interval95": [float(low), float(high)]}


def grid_edges(chosen: tuple[float, float], alphas, betas, signed_beta: bool = False) -> list[str]:
    """The weights of a tuned (α, β) that sit on their grid's largest value (β's smallest too where it may be
    negative): the best may lie beyond it, so the comparison would hold an under-tuned decoder (α at its
    smallest is no lament: α → 0 is no LM)."""
    names = []
    if len(alphas) > 1 and chosen[0] >= max(alphas):
        names.append("alpha")
    if len(betas) > 1 and (chosen[1] >= max(betas) or signed_beta and chosen[1] <= min(betas)):
        names.append("beta")
    return names
