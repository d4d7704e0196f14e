"""Text generated in NumPy, without TensorFlow: `LanguageModel`'s next words a step at a time, by the rules of
the SavedModel's `generate` signature (`serving.sampling`).

    import nplm_tf
    from nplm_tf.interop import generation
    model = nplm_tf.LanguageModel("runs/mlp9")
    generation.generate(model, "The jury said", max_tokens=10, seed=1)

Greedy at temperature ≤ 0 (the most probable word, ties to the lower id: the signature's words exactly, but for
probabilities equal to float32's rounding); with `top_k` > 0 a word drawn among the k most probable in
proportion to P^(1/temperature); else from every word (at temperature 1 by the head itself, a short list's
tail without the whole distribution: `LanguageModel.sample_word`). `<unk>` is never chosen unless `allow_unk`.
Draws use NumPy's generator: the same seed gives the same text here, not the signature's text.
"""

from __future__ import annotations

import math

import numpy as np

from nplm_tf.engines import NUMPY
from nplm_tf.interop.language_model import LanguageModel, State
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError

EOS, UNK = "</s>", "<unk>"


def generate(
    model: LanguageModel,
    prompt: str,
    max_tokens: int = 20,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    allow_unk: bool = False,
) -> str:
    """The words generated after `prompt` (tokenized as in training), at most `max_tokens`, stopping at `</s>`
    (not included), joined by spaces."""
    if not isinstance(prompt, str):
        raise UserError(f"a prompt must be a string, not {type(prompt).__name__}.")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise UserError(f"max_tokens={max_tokens!r} must be an integer ≥ 0.")
    if math.isnan(temperature):
        raise UserError("temperature=nan must be a number (<= 0: greedy).")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"seed={seed!r} must be an integer.")
    state = State()
    model.BeginSentenceWrite(state)
    for word in corpus_lib.tokenize(prompt):
        state = _after(model, state, word)
    pair = np.array([seed % 2**64, 0], np.uint64).view(np.int64)
    words = []
    for step in range(max_tokens):
        word = _next_word(model, state, temperature, top_k, NUMPY.fold_in(pair, step), allow_unk)
        if word == EOS:
            break
        words.append(word)
        state = _after(model, state, word)
    return " ".join(words)


def _after(model: LanguageModel, state: State, word: str) -> State:
    out = State()
    model.BaseScore(state, word, out)
    return out


def _next_word(model: LanguageModel, state: State, temperature: float, top_k: int, seed, allow_unk: bool) -> str:
    """One step's word (`seed`: the step's seed pair)."""
    if temperature <= 0 or top_k > 0:
        wanted = 1 if temperature <= 0 else min(top_k, model.vocab_size)
        ranked = model.top_words(state, min(wanted + (0 if allow_unk else 1), model.vocab_size))
        kept = [(word, value) for word, value in ranked if allow_unk or word != UNK][:wanted]
        if temperature <= 0:
            return kept[0][0]
        logits = np.array([value for _, value in kept]) * math.log(10) / max(temperature, 1e-6)
        return kept[int(NUMPY.categorical(logits[None, :], seed)[0])][0]
    return model.sample_word(state, int(seed[0]), allow_unk, temperature)
