"""A cache of the text so far (Kuhn and De Mori, 1990; SRILM's `ngram -cache`): a unigram model of the words
the document has used already, each occurrence weighted by decay^age, with one more occurrence spread evenly
over the |V| types, so that no word is impossible:

    P_cache(w | w_1 … w_{t−1}) = (Σ_{i<t} decay^{t−1−i} [w_i = w] + 1/|V|) / (Σ_{i<t} decay^{t−1−i} + 1),

uniform before the document's first word. A document is what the text marks as one
(`pipelines.corpus.unit_documents`): Brown's texts (a line each), or the lines between two blank lines of a
file (each file another); the cache then sees the document so far, across its lines. A text that marks none,
one sentence a line as speech and translation text often is, gets the last `window` words instead, across
lines (SRILM's cache length). `</s>` is predicted but never cached: it is no word of the text.

It sums to 1 over the vocabulary at every position, so an ensemble that
mixes it in (`tools.ensemble`) stays exactly normalized. Alone it is a poor model; mixed with networks and
n-grams it lends probability to the words a text repeats (its names, its topic), which no window of n − 1
words sees. Its state is the whole document so far, not the last n − 1 words: `LanguageModel` and the SavedModel,
whose states are n-gram contexts, do not serve it.
"""

from __future__ import annotations

import collections

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


WINDOW = 500  # words a cache keeps where the text marks no documents (Kuhn and De Mori's was 200)


class UnigramCache:
    """The cache over a vocabulary of `vocab_size` types, each occurrence's weight decaying by `decay` a word;
    `window`: the words kept where the text marks no documents."""

    def __init__(self, decay: float, vocab_size: int, window: int = WINDOW):
        (self.decay,) = check_decays([decay])
        if window < 1:
            raise ValueError(f"a cache's window must be at least 1 word, not {window}")
        self.vocab_size, self.window = vocab_size, window

    @property
    def name(self) -> str:
        return f"cache (decay {self.decay:g})"

    def token_probabilities(self, arrays: TokenArrays) -> np.ndarray:
        """P_cache of each predicted token of `arrays`, in order (the n-gram models' `token_probabilities`), each
        line its own document: the line so far."""
        return self._by_line(arrays)

    def text_probabilities(self, arrays: TokenArrays, documents: list[int] | None) -> np.ndarray:
        """P_cache of each predicted token of `arrays`, in order, the lines read as the text they come from:
        `documents`, each line's document (`pipelines.corpus.unit_documents`), or None where the text marks
        none (the last `window` words kept, across lines)."""
        if documents is not None and len(set(documents)) == len(documents):
            return self._by_line(arrays)  # each line its own document: every line at once
        predicted = arrays.tokens[arrays.predicted]
        starts = np.zeros(predicted.size, bool)  # a document begins at this predicted token
        if documents is not None:
            line = (np.cumsum(arrays.offset == 0) - 1)[arrays.predicted]
            first = np.concatenate([[True], line[1:] != line[:-1]])
            doc = np.asarray(documents)[line]
            starts = first & np.concatenate([[True], doc[1:] != doc[:-1]])
        return self._stream(predicted, starts, None if documents is not None else self.window)

    def _stream(self, tokens: np.ndarray, starts: np.ndarray, window: int | None) -> np.ndarray:
        """The cache along the text, token by token: emptied where a document starts, and (`window`) forgetting
        each word `window` words after it. The weights grow as decay^-t, rescaled as `_by_line`'s."""
        eos = 0  # `</s>`: predicted, never cached
        growth, scale, total = 1.0 / self.decay, 1.0, 0.0
        weights: dict[int, float] = {}
        kept: collections.deque = collections.deque()  # (word, its weight) of the window's words, oldest first
        out = np.empty(tokens.size, np.float64)
        for i, (w, start) in enumerate(zip(tokens.tolist(), starts.tolist())):
            if start:
                weights.clear()
                kept.clear()
                scale, total = 1.0, 0.0
            out[i] = (weights.get(w, 0.0) + scale / self.vocab_size) / (total + scale)
            if w == eos:  # no word of the text: nothing ages
                continue
            scale *= growth
            if scale > RESCALE:
                weights = {k: v / scale for k, v in weights.items()}
                kept = collections.deque((k, v / scale) for k, v in kept)
                total, scale = total / scale, 1.0
            weights[w] = weights.get(w, 0.0) + scale
            total += scale
            if window is not None:
                kept.append((w, scale))
                if len(kept) > window:
                    old, weight = kept.popleft()
                    weights[old] -= weight
                    total -= weight
        return out

    def _by_line(self, arrays: TokenArrays) -> np.ndarray:
        """P_cache of each predicted token, the cache being the line so far (each line a document).

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
