"""`LanguageModel`: a trained network, its mixture or an n-gram behind KenLM's Python interface.

    import nplm_tf
    model = nplm_tf.LanguageModel("runs/mlp9")          # was: kenlm.Model("lm.arpa")
    model.score("the jury said it did find that", bos=True, eos=True)   # log10 P
    state, out = nplm_tf.State(), nplm_tf.State()
    model.BeginSentenceWrite(state)
    model.BaseScore(state, "the", out)                  # log10 P(the | <s>); out = state + "the"

Code written against `kenlm.Model` runs with it after changing the constructor: `order`, `score`,
`perplexity`, `full_scores`, `BeginSentenceWrite`, `NullContextWrite`, `BaseScore`, `BaseFullScore`, `word
in model`, and states that copy, compare and hash. It needs no TensorFlow for a model directory or an n-gram
directory (the network in NumPy, `nplm_tf.inference.network`); only a SavedModel export read on its own
loads TensorFlow.

A feed-forward model's state is the last n − 1 words, as an n-gram's is, and one forward pass gives the
whole next-word distribution: each context's distribution is computed once and kept in a bounded cache
(`cache_size` contexts, least recently used dropped first), so a decoder asking for many words after the
same context pays once; `score_batch` computes several new contexts in one pass.

What differs from KenLM:
- ids are this model's (`</s>` = 0, `<unk>` = 1, then by train count); the vocabulary is the model's, and a
  word outside it is scored as `<unk>` with `oov` true (KenLM does the same with its own `<unk>`); a literal
  `</s>` inside a sentence is `<unk>` too, as in training (KenLM scores it as the end of a sentence);
- the state holds the last order − 1 token ids (`<s>` = |V|; −1 for "nothing": before the sentence, or a
  null context), not KenLM's minimal right context, so two states compare equal when their last words do;
- `ngram_length` is, for a network, the words it read plus the predicted one (min(position + 1, n), as
  `nplm_tf.query` prints it); for an n-gram, the length of the longest n-gram matched, as KenLM's;
- a network has no context-free distribution: after `NullContextWrite` it reads its `<s>` padding, the
  start of a sentence (an n-gram reads no context: its unigrams).
"""

from __future__ import annotations

import collections
import math
import os
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from nplm_tf.engines import NUMPY
from nplm_tf.tools import sources
from nplm_tf.tools.sources import NOTHING, RAW
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError

DEFAULT_CACHE = 1024  # contexts: |V| float64 each (14,118 words: 113 kB, so about 116 MB at most)
_LOG10_E = 1 / math.log(10)


class State:
    """The context a model scores the next word in: its last order − 1 token ids, oldest first (−1:
    nothing there). Copy with `copy.copy` or `State(other)`; equal states hash alike."""

    __slots__ = ("words", "model")

    def __init__(self, other: State | None = None):
        self.words: tuple[int, ...] = other.words if other is not None else ()
        self.model = other.model if other is not None else None

    def __copy__(self) -> State:
        return State(self)

    def __eq__(self, other) -> bool:
        return isinstance(other, State) and self.words == other.words

    def __hash__(self) -> int:
        return hash(self.words)

    def __repr__(self) -> str:
        return f"State({list(self.words)})"


class FullScoreReturn:
    """`BaseFullScore`'s answer, as KenLM's: `log_prob` (log10), `ngram_length`, `oov`."""

    __slots__ = ("log_prob", "ngram_length", "oov")

    def __init__(self, log_prob: float, ngram_length: int, oov: bool):
        self.log_prob, self.ngram_length, self.oov = log_prob, ngram_length, oov

    def __iter__(self):
        return iter((self.log_prob, self.ngram_length, self.oov))

    def __repr__(self) -> str:
        return f"FullScoreReturn(log_prob={self.log_prob}, ngram_length={self.ngram_length}, oov={self.oov})"


class LanguageModel:
    """A language model read from `path` with KenLM's `kenlm.Model` interface.

    Args:
      path: a model directory (`nplm_tf.train`; with the mixture its `mixture.json` keeps, unless `mixture`
        is False), an n-gram directory (`nplm_tf.ngram`), a SavedModel export (`MODEL_DIR/export/<v>` is
        read from its model directory; another export through TensorFlow's `next_word` over every word), or
        an ensemble's fit (`evaluate --model_dirs … --save_ensemble=FILE`: its networks and n-grams mixed with
        the weights fitted per context frequency, or by EM without an n-gram).
      mixture: use the saved mixture of a model directory (default), or the network alone.
      ngram_dir: mix the network with this n-gram instead (its weights: the saved fit for it, else fitted on
        the model's valid split in memory).
      cache_size: most context distributions kept (≥ 1).
      normalized: False scores a network directory (a full softmax, no mixture) by its raw output y_w, as nplm
        and Moses do: one dot product a word from the precomputed first layer (`NumpyNetwork.premultiplied`),
        no normalization over |V|. For self-normalized networks (`train --self_normalize`, `--loss=nce`): one
        whose ln Z on valid is wide is refused.
    """

    def __init__(
        self,
        path: str,
        mixture: bool = True,
        ngram_dir: str | None = None,
        cache_size: int = DEFAULT_CACHE,
        normalized: bool = True,
    ):
        if not isinstance(path, (str, os.PathLike)):
            raise UserError(
                f"LanguageModel needs a path (a model, n-gram or export directory), not {type(path).__name__}."
            )
        path = os.fspath(path)
        if not isinstance(cache_size, int) or cache_size < 1:
            raise UserError(f"cache_size={cache_size!r} must be a positive integer.")
        self.path, self.cache_size = path, cache_size
        self._cache: collections.OrderedDict[tuple[int, ...], tuple] = collections.OrderedDict()
        self._source = sources.open_source(path, mixture=mixture, ngram_dir=ngram_dir, normalized=normalized)
        self.vocab, self.order = self._source.vocab, self._source.order
        self.network, self.ngram = self._source.network, self._source.ngram
        self._raw = not normalized
        self.vocab_size = self.vocab.size
        self.bos_id = self.vocab.size
        self._index = {w: i for i, w in enumerate(self.vocab.words) if i >= 2}  # "</s>" in a text is <unk>
        self._index["<unk>"] = 1
        self._call_index = dict(self._index, **{"</s>": 0})  # BaseScore's word: "</s>" is the end

    # ------------------------------------------------------------ KenLM API --

    def __contains__(self, word: str) -> bool:
        return word in self._index

    def __repr__(self) -> str:
        return f"LanguageModel({self.path!r}, order={self.order})"

    def BeginSentenceWrite(self, state: State) -> None:  # noqa: N802 (KenLM's names)
        """Sets `state` to the start of a sentence (`<s>`)."""
        self._check_state(state, fresh=True)
        state.words, state.model = (NOTHING,) * (self.order - 2) + (self.bos_id,), self
        if self.order == 1:
            state.words = ()

    def NullContextWrite(self, state: State) -> None:  # noqa: N802
        """Sets `state` to no context at all."""
        self._check_state(state, fresh=True)
        state.words, state.model = (NOTHING,) * (self.order - 1), self

    def BaseScore(self, in_state: State, word: str, out_state: State) -> float:  # noqa: N802
        """log10 P(word | in_state); `out_state` becomes in_state followed by the word."""
        if self._raw and in_state.__class__ is State and in_state.model is self and out_state.__class__ is State:
            if word.__class__ is str:  # a decoder's call: the raw score's own short path
                context = in_state.words
                entry = self._cache.get(context)
                if entry is None:
                    entry = self._cache[context] = (self.network.raw_hidden(context), RAW)
                    if len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
                else:
                    self._cache.move_to_end(context)
                i = self._call_index.get(word, 1)
                out_state.words, out_state.model = (context + (i,))[1:], self
                return self.network.raw_output(entry[0], i) * _LOG10_E
        if in_state.__class__ is not State or in_state.model is not self:
            self._check_state(in_state)
        if out_state.__class__ is not State:
            self._check_state(out_state, fresh=True)
        if word.__class__ is not str:
            raise UserError(f"a word must be a string, not {type(word).__name__} ({word!r}).")
        context = in_state.words
        entry = self._cache.get(context)
        if entry is None:
            entry = self._entry(context)
        else:
            self._cache.move_to_end(context)
        i = self._call_index.get(word, 1)
        out_state.words, out_state.model = (context + (i,))[1:] if self.order > 1 else (), self
        row, offset = entry[0], entry[1]
        if offset is None:
            return math.log10(row[i]) if row[i] > 0 else -math.inf
        if offset.__class__ is str:  # RAW (compared by type: a pickled copy has its own string)
            return self.network.raw_output(row, i) * _LOG10_E
        return (float(row[i]) - offset) * _LOG10_E

    def BaseFullScore(self, in_state: State, word: str, out_state: State) -> FullScoreReturn:  # noqa: N802
        """`BaseScore` with the length of the context used and whether the word is out of the vocabulary."""
        context = in_state.words if in_state.__class__ is State else None
        value = self.BaseScore(in_state, word, out_state)
        i = self._call_index.get(word, 1)
        return FullScoreReturn(value, self._length(context, i), i == 1)

    def full_scores(self, sentence: str, bos: bool = True, eos: bool = True) -> Iterator[tuple[float, int, bool]]:
        """(log10 P, ngram length, oov) of each word of the sentence, then of `</s>` when `eos`. A literal
        `</s>` inside the sentence is `<unk>`, as in training."""
        state, out = State(), State()
        (self.BeginSentenceWrite if bos else self.NullContextWrite)(state)
        ids = [self._index.get(w, 1) for w in self._words(sentence)]
        for i in ids + ([0] if eos else []):
            yield tuple(self._score_id(state, i, out, i == 1))
            state, out = out, state

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        """log10 P of the sentence (its words, then `</s>` when `eos`)."""
        return sum(value for value, _, _ in self.full_scores(sentence, bos, eos))

    def perplexity(self, sentence: str) -> float:
        """10^(−score / (words + 1)), as KenLM's (sentence boundaries on)."""
        words = len(self._words(sentence)) + 1
        return 10.0 ** (-self.score(sentence) / words)

    # -------------------------------------------------------------- batches --

    def score_batch(self, states: Sequence[State], words: Sequence[str]) -> np.ndarray:
        """log10 P(words[i] | states[i]) for every i, the contexts not cached computed in one pass."""
        for state in states:
            self._check_state(state)
        self.prefetch(states)
        return np.array([self.BaseScore(s, w, State()) for s, w in zip(states, words, strict=True)])

    def prefetch(self, states: Iterable[State]) -> None:
        """Computes the distributions of these states' contexts that are not cached, in one pass (at most
        `cache_size` of them are kept)."""
        missing = list(dict.fromkeys(s.words for s in states if s.words not in self._cache))
        for lo in range(0, len(missing), self.cache_size):  # never more at once than the cache keeps
            part = missing[lo : lo + self.cache_size]
            self._remember(zip(part, self._compute(part)))

    def next_word_log10(self, state: State) -> np.ndarray:
        """log10 P(w | state) of every word w (id order), (|V|,) float64."""
        self._check_state(state)
        row, offset = self._entry(state.words)
        if offset is None:
            with np.errstate(divide="ignore"):
                return np.log10(row)
        if offset.__class__ is str:  # RAW (compared by type: a pickled copy has its own string)
            return self.network.raw_outputs(row).astype(np.float64) * _LOG10_E
        return (row.astype(np.float64) - offset) * _LOG10_E

    def top_words(self, state: State, k: int = 10) -> list[tuple[str, float]]:
        """The k most probable next words after `state` and their log10 P, most probable first (ties: the lower
        id); a lone network ranks by its head (a short list's tail without the whole distribution)."""
        self._check_state(state)
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= self.vocab_size:
            raise UserError(f"k={k!r} must be an integer in [0, |V| = {self.vocab_size}].")
        ranked = self._source.ranked(state.words, k)
        if ranked is None:
            values, ids = (a[0] for a in NUMPY.top_k(self.next_word_log10(state)[None, :], k))
        else:
            with np.errstate(divide="ignore"):
                values, ids = np.log10(ranked[0]), ranked[1]
        return [(self.vocab.words[i], float(v)) for i, v in zip(ids.tolist(), values, strict=True)]

    def sample_word(self, state: State, seed: int, allow_unk: bool = False, temperature: float = 1.0) -> str:
        """A next word drawn in proportion to P(w | state)^(1/temperature), `<unk>` never unless `allow_unk` (the
        others keep their proportions); the same seed draws the same word. A lone network draws by its head."""
        self._check_state(state)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise UserError(f"seed={seed!r} must be an integer.")
        if not temperature > 0:
            raise UserError(f"temperature={temperature!r} must be above 0 (greedy: `top_words(state, 1)`).")
        pair, banned = np.array([seed % 2**64, 0], np.uint64).view(np.int64), None if allow_unk else 1
        i = self._source.drawn(state.words, pair, banned) if temperature == 1.0 else None
        if i is None:
            log_p = self.next_word_log10(state) / (_LOG10_E * temperature)
            log_p[banned if banned is not None else []] = -np.inf
            i = int(NUMPY.categorical(log_p[None, :], NUMPY.fold_in(pair, 0))[0])
        return self.vocab.words[i]

    # ------------------------------------------------------------- internals --

    def _words(self, sentence: str) -> list[str]:
        if not isinstance(sentence, str):
            raise UserError(f"a sentence must be a string, not {type(sentence).__name__}.")
        return corpus_lib.tokenize(sentence)

    def _score_id(self, state: State, i: int, out: State, oov: bool) -> FullScoreReturn:
        context = state.words
        value = self._value(self._entry(context), i)
        out.words, out.model = (context + (i,))[1:] if self.order > 1 else (), self
        return FullScoreReturn(value, self._length(context, i), oov)

    def _value(self, entry, i: int) -> float:
        row, offset = entry[0], entry[1]
        if offset is None:
            return math.log10(row[i]) if row[i] > 0 else -math.inf
        if offset.__class__ is str:  # RAW (compared by type: a pickled copy has its own string)
            return self.network.raw_output(row, i) * _LOG10_E
        return (float(row[i]) - offset) * _LOG10_E

    def _check_state(self, state, fresh: bool = False) -> None:
        if not isinstance(state, State):
            raise UserError(f"a state must be an nplm_tf.State, not {type(state).__name__}.")
        if not fresh and state.model is not self:
            if state.model is None:
                raise UserError("this state was never set: call BeginSentenceWrite or NullContextWrite first.")
            raise UserError("this state belongs to another model; states are not shared between models.")

    def _entry(self, context: tuple[int, ...]):
        """The cached (row, offset) of a context, computed when missing: a full softmax's float32 logits and
        their ln normalizer (log10 P(w) = (y_w − offset)·log10 e, exact even where P underflows), else the
        float64 probabilities and None."""
        entry = self._cache.get(context)
        if entry is None:
            entry = self._compute([context])[0]
            self._remember([(context, entry)])
        else:
            self._cache.move_to_end(context)
        return entry

    def _remember(self, entries: Iterable[tuple[tuple[int, ...], object]]) -> None:
        """Caches (context, entry) pairs of contexts not cached (each goes in last, as the most recent), then
        drops the least recent beyond `cache_size`."""
        self._cache.update(entries)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _compute(self, contexts: list[tuple[int, ...]]) -> list:
        """Each context's cache entry (`_entry`)."""
        return self._source.entries(contexts)

    def _length(self, context: tuple[int, ...], word: int) -> int:
        return self._source.length([w for w in context if w != NOTHING], word)
