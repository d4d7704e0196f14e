"""A language model for pyctcdecode's CTC beam search: the network, its mixture, or an n-gram.

    import nplm_tf
    from nplm_tf.interop.decoders import PyCTCDecodeLM
    from pyctcdecode import BeamSearchDecoderCTC, Alphabet

    lm = PyCTCDecodeLM(nplm_tf.LanguageModel("runs/mlp9"), alpha=0.5, beta=1.5)
    decoder = BeamSearchDecoderCTC(Alphabet.build_alphabet(labels), language_model=lm)
    text = decoder.decode(log_probs)      # (frames, labels) emissions

`PyCTCDecodeLM` is pyctcdecode's `AbstractLanguageModel` with the shallow fusion of pyctcdecode's own
`LanguageModel` (which wraps a `kenlm.Model`): a word's score is α·ln P(word | state) + β, with the
unknown-word offset added (in log10, before α) to a word outside the unigrams, `</s>` scored after the last
word when `score_boundary`, and a partial word that starts no known word penalized by the offset (scaled by
its length past 6 characters). The state is `nplm_tf.State`; the model, `nplm_tf.LanguageModel`, computes
each context's distribution once, so the beam's many words after one context cost one forward pass.

pyctcdecode 0.5.0 declares numpy < 2 but runs under numpy 2: install it without its dependencies
(`pip install -e '.[asr]' && pip install --no-deps pyctcdecode==0.5.0`, as the README's test command does).
"""

from __future__ import annotations

import math
from collections.abc import Collection

from pyctcdecode.language_model import AbstractLanguageModel
from pygtrie import CharTrie

from nplm_tf.interop.language_model import LanguageModel, State
from pipelines.errors import UserError

AVG_TOKEN_LEN = 6  # pyctcdecode's: characters past which an unknown partial word's penalty grows
LN_10 = math.log(10)


class PyCTCDecodeLM(AbstractLanguageModel):
    """pyctcdecode's language model interface over an `nplm_tf.LanguageModel`.

    Args:
      model: an `nplm_tf.LanguageModel`, or a path that one reads (model, n-gram or export directory).
      unigrams: the words a partial word may grow into (default: the model's vocabulary, `</s>` and `<unk>`
        left out); a word outside them gets `unk_score_offset`, as a word outside the model does.
      alpha: the language model's weight (on natural-log scores); beta: the bonus per word.
      unk_score_offset: added (log10) to an unknown word's score, and to a partial word that starts none.
      score_boundary: score the first word after `<s>` and `</s>` after the last, as KenLM's boundaries.
    """

    def __init__(
        self,
        model: LanguageModel | str,
        unigrams: Collection[str] | None = None,
        alpha: float = 0.5,
        beta: float = 1.5,
        unk_score_offset: float = -10.0,
        score_boundary: bool = True,
    ):
        self.model = model if isinstance(model, LanguageModel) else LanguageModel(model)
        words = unigrams if unigrams is not None else self.model.vocab.words[2:]
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            raise UserError("unigrams must be a collection of strings (words).")
        self._unigrams = {w for w in words if w}
        self._trie = CharTrie.fromkeys(self._unigrams)
        self.alpha, self.beta = float(alpha), float(beta)
        self.unk_score_offset, self.score_boundary = float(unk_score_offset), bool(score_boundary)

    @property
    def order(self) -> int:
        return self.model.order

    def get_start_state(self) -> State:
        state = State()
        (self.model.BeginSentenceWrite if self.score_boundary else self.model.NullContextWrite)(state)
        return state

    def score_partial_token(self, partial_token: str) -> float:
        unknown = 0.0 if self._trie.has_node(partial_token) else 1.0
        score = self.unk_score_offset * unknown
        if len(partial_token) > AVG_TOKEN_LEN:
            score = score * len(partial_token) / AVG_TOKEN_LEN
        return score

    def score(self, prev_state: State, word: str, is_last_word: bool = False) -> tuple[float, State]:
        end_state = State()
        log10 = self.model.BaseScore(prev_state, word, end_state)
        if word not in self._unigrams or word not in self.model:
            log10 += self.unk_score_offset
        if is_last_word and self.score_boundary:
            log10 += self.model.BaseScore(end_state, "</s>", State())
        return self.alpha * log10 * LN_10 + self.beta, end_state

    def reset_params(self, **params) -> None:
        """pyctcdecode's: new `alpha`, `beta`, `unk_score_offset` or `score_boundary` (others refused)."""
        for name, value in params.items():
            if name not in ("alpha", "beta", "unk_score_offset", "score_boundary"):
                raise UserError(f"{name} is not a parameter of the language model.")
            setattr(self, name, bool(value) if name == "score_boundary" else float(value))
