"""A cache of the text so far (Kuhn and De Mori, 1990; SRILM's `ngram -cache`): a unigram model of the words
the unit (a line of the split: one Brown text) has used already, each occurrence weighted by decay^age, with
one more occurrence spread evenly over the |V| types, so that no word is impossible:

    P_cache(w | w_1 … w_{t−1}) = (Σ_{i<t} decay^{t−1−i} [w_i = w] + 1/|V|) / (Σ_{i<t} decay^{t−1−i} + 1),

uniform before the unit's first word. It sums to 1 over the vocabulary at every position, so an ensemble that
mixes it in (`tools.ensemble`) stays exactly normalized. Alone it is a poor model; mixed with networks and
n-grams it lends probability to the words a text repeats (its names, its topic), which no window of n − 1
words sees. Its state is the whole unit so far, not the last n − 1 words: `LanguageModel` and the SavedModel,
whose states are n-gram contexts, do not serve it.
"""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines.ngram_arrays import TokenArrays

RESCALE = 1e100  # the newest word's weight grows as decay^-t: divide every weight down before it overflows


def check_decays(decays) -> list[float]:
    """The decays as floats, each in (0, 1] (1: every word so far counts the same), or ValueError naming the
    first bad one."""
    out = []
    for value in decays:
        try:
            decay = float(value)
        except (TypeError, ValueError):
            decay = float("nan")
        if not 0 < decay <= 1:
            raise ValueError(f"a cache's decay must be a number in (0, 1], not {value!r}")
        out.append(decay)
    return out


class UnigramCache:
    """The cache over a vocabulary of `vocab_size` types, each occurrence's weight decaying by `decay` a word."""

    def __init__(self, decay: float, vocab_size: int):
        (self.decay,) = check_decays([decay])
        self.vocab_size = vocab_size

    @property
    def name(self) -> str:
        return f"cache (decay {self.decay:g})"

    def token_probabilities(self, arrays: TokenArrays) -> np.ndarray:
        """P_cache of each predicted token of `arrays`, in order (the n-gram models' `token_probabilities`).

        Every line advances one position a step, all lines together, so the loop runs over positions within a
        line (a line's length), never over tokens: a step reads and adds one weight per line, in the table of
        (line, word) pairs. Rather than decaying every weight each step, the word at position t adds
        decay^-t; the common factor cancels in the ratio, and when it grows large, every weight is divided
        down."""
        tokens, offset = arrays.tokens, arrays.offset
        line = np.cumsum(offset == 0) - 1
        _, slot = np.unique(line * (self.vocab_size + 1) + tokens, return_inverse=True)
        weights = np.zeros(int(slot.max(initial=-1)) + 1, np.float64)
        out = np.empty(tokens.size, np.float64)
        by_position = np.argsort(offset, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(offset))])
        growth, scale, total = 1.0 / self.decay, 1.0, 0.0  # total: the weight of a line's words so far
        for t in range(1, bounds.size - 1):
            at = by_position[bounds[t] : bounds[t + 1]]  # position t of each line that long: one slot a line
            out[at] = (weights[slot[at]] + scale / self.vocab_size) / (total + scale)  # the newest word weighs scale
            scale *= growth
            if scale > RESCALE:
                weights /= scale
                total, scale = total / scale, 1.0
            weights[slot[at]] += scale
            total += scale
        return out[arrays.predicted]
