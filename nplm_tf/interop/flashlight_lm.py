"""A language model for flashlight-text's beam search (the C++ decoder behind torchaudio's `ctc_decoder`): a
network, its mixture, an ensemble or an n-gram, through `nplm_tf.LanguageModel`.

    import nplm_tf
    from nplm_tf.interop import flashlight_lm

    model = nplm_tf.LanguageModel("runs/mlp9")                  # or normalized=False for a self-normalized one
    tokens = ["-", "|", *"abcdefghijklmnopqrstuvwxyz'"]          # CTC's blank, the word boundary, the letters
    decoder = flashlight_lm.lexicon_decoder(model, tokens, beam_size=500, lm_weight=0.5, word_score=1.0)
    words = decoder.decode(emissions)                          # (frames, tokens) log-probabilities, float32

flashlight's `LexiconDecoder` calls the language model once for each hypothesis that completes a word, with
no batching. `FlashlightLM` answers as flashlight's own KenLM does (log10 P of the word after the state) and
keeps one `LMState` per context (the last order − 1 words): flashlight compares states by identity, so
hypotheses that share a context recombine. The states are forgotten at each `start` (each utterance), so
memory stays bounded by one utterance's contexts; the model's own cache of distributions is bounded too.

One `FlashlightLM` a decoder: two decoders in two threads need two (their `start`s would clear each other's
states); they may share one `LanguageModel`. For torchaudio, `lm_dict` is `word_dictionary(model)`'s words
and the lexicon `lexicon(model, tokens)`'s spellings (each ending in the word boundary).
"""

from __future__ import annotations

import numpy as np
from flashlight.lib.text.decoder import (
    LM,
    CriterionType,
    LexiconDecoder,
    LexiconDecoderOptions,
    LMState,
    SmearingMode,
    Trie,
)
from flashlight.lib.text.dictionary import Dictionary

from nplm_tf.interop.language_model import LanguageModel, State
from pipelines.errors import UserError

EOS, UNK = "</s>", "<unk>"


class FlashlightLM(LM):
    """flashlight-text's `LM` over an `nplm_tf.LanguageModel`.

    Args:
      model: the language model (any kind `LanguageModel` reads).
      word_dict: flashlight's word `Dictionary` the decoder's word indices refer to (`word_dictionary`).
    """

    def __init__(self, model: LanguageModel, word_dict: Dictionary):
        LM.__init__(self)
        self.model = model
        self.words = [word_dict.get_entry(i) for i in range(word_dict.index_size())]
        self._states: dict[tuple[int, ...], LMState] = {}  # context -> its one state
        self._contexts: dict[LMState, tuple[int, ...]] = {}  # state -> its context (states hash by identity)

    def _state(self, words: tuple[int, ...]) -> LMState:
        state = self._states.get(words)
        if state is None:
            state = self._states[words] = LMState()
            self._contexts[state] = words
        return state

    def start(self, start_with_nothing: bool) -> LMState:
        self._states.clear()
        self._contexts.clear()
        state = State()
        (self.model.NullContextWrite if start_with_nothing else self.model.BeginSentenceWrite)(state)
        return self._state(state.words)

    def score(self, state: LMState, token_index: int) -> tuple[LMState, float]:
        return self._advance(state, self.words[token_index])

    def finish(self, state: LMState) -> tuple[LMState, float]:
        return self._advance(state, EOS)

    def _advance(self, state: LMState, word: str) -> tuple[LMState, float]:
        current, following = State(), State()
        current.words, current.model = self._contexts[state], self.model
        value = self.model.BaseScore(current, word, following)
        return self._state(following.words), value


def word_dictionary(model: LanguageModel) -> Dictionary:
    """The model's words (`</s>` left out: no lexicon spells it; `<unk>` kept, as flashlight expects) as
    flashlight's word `Dictionary`, for the decoder and torchaudio's `lm_dict`."""
    words = Dictionary()
    for word in model.vocab.words:
        if word != EOS:
            words.add_entry(word)
    return words


def lexicon(model: LanguageModel, tokens: list[str], boundary: str = "|") -> dict[str, list[str]]:
    """Each of the model's words spelled in `tokens` (single characters; a word with another character is left
    out), then the word boundary token, as flashlight's and torchaudio's lexicons spell them (`the t h e |`):
    word -> its tokens. Without the boundary the decoder may cut a word anywhere its pieces are words. One
    sentence when none can be spelled."""
    alphabet = set(tokens) - {boundary}
    spelled = {w: [*w, boundary] for w in model.vocab.words if w not in (EOS, UNK) and set(w) <= alphabet}
    if not spelled:
        raise UserError(
            f"none of the model's {model.vocab.size:,} words can be spelled in these {len(tokens)} tokens "
            f"({''.join(sorted(alphabet))[:40]}); give the alphabet the model's text is written in."
        )
    return spelled


class Decoder:
    """flashlight's `LexiconDecoder` with `FlashlightLM` over a model and its lexicon: `decode` takes
    (frames, tokens) log-probabilities and gives the best hypothesis's words (`last`: its score too)."""

    def __init__(self, lm: LM, words: Dictionary, tokens: list[str], spellings: dict, options, blank: str, space: str):
        self.lm, self.words, self.tokens = lm, words, tokens
        index = {t: i for i, t in enumerate(tokens)}
        if blank not in index or space not in index:
            raise UserError(f"the tokens need the blank {blank!r} and the word boundary {space!r}.")
        self.space = index[space]
        trie = Trie(len(tokens), index[space])
        start = lm.start(False)
        for word, letters in spellings.items():
            word_index = words.get_index(word)
            _, score = lm.score(start, word_index)
            trie.insert([index[c] for c in letters], word_index, score)
        trie.smear(SmearingMode.MAX)
        unk = words.get_index(UNK)
        self.decoder = LexiconDecoder(options, trie, lm, index[space], index[blank], unk, [], False)
        self.last = None

    def decode(self, emissions: np.ndarray) -> list[str]:
        emissions = np.ascontiguousarray(emissions, np.float32)
        frames, size = emissions.shape
        if size != len(self.tokens):
            raise UserError(f"the emissions have {size} columns, the tokens {len(self.tokens)}.")
        # The lexicon's words end in the boundary; a frame of it after the last lets the last word end where the
        # emissions do not (a path that already ends in the boundary takes it as silence: the options' silence
        # score, 0 in `lexicon_decoder`'s).
        boundary = np.full((1, size), np.log(1e-30), np.float32)
        boundary[0, self.space] = 0.0
        emissions = np.concatenate([emissions, boundary])
        best = self.decoder.decode(emissions.ctypes.data, frames + 1, size)[0]
        self.last = best
        return [self.words.get_entry(i) for i in best.words if i >= 0]


def lexicon_decoder(
    model: LanguageModel,
    tokens: list[str],
    beam_size: int = 50,
    lm_weight: float = 0.5,
    word_score: float = 0.0,
    blank: str = "-",
    space: str = "|",
    lm: LM | None = None,
) -> Decoder:
    """A `Decoder` over `model` (or over `lm`, flashlight's own KenLM say, with the model's words and lexicon):
    CTC, beam `beam_size` (tokens too), no threshold, unknown words impossible, silence free."""
    words = word_dictionary(model)
    options = LexiconDecoderOptions(
        beam_size, beam_size, float("inf"), lm_weight, word_score, float("-inf"), 0.0, False, CriterionType.CTC
    )
    spellings = lexicon(model, [t for t in tokens if t not in (blank, space)], space)
    return Decoder(lm or FlashlightLM(model, words), words, tokens, spellings, options, blank, space)
