"""`nplm_tf.interop.flashlight_lm`: flashlight-text's lexicon beam search with `LanguageModel` as its language model,
against flashlight's own KenLM on the same ARPA file."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

import numpy as np
import pytest

import nplm_tf
from nplm_tf.baselines import build
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib
from pipelines.errors import UserError
from tests import helpers

flashlight_lm = pytest.importorskip("nplm_tf.interop.flashlight_lm")  # the flashlight extra (in the test extra)

TOKENS = ["-", "|", *"abcdefghijklmnopqrstuvwxyz'."]
TEXTS = [
    "the cat sees the house .",
    "a bird follows some food .",
    "my friend likes the teacher .",
    "the dog finds a tree .",
    "the teacher sees my friend .",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """KN3 built on a tiny corpus, its model.arpa imported back as an n-gram directory, and a self-normalized
    network (raw scoring)."""
    root = tmp_path_factory.mktemp("flashlight")
    paths = helpers.tiny_corpus_files(root, train=150)
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    build.train_ngram(3, str(root / "kn3"), corpus, min_count=1)
    arpa = str(root / "kn3" / "model.arpa")
    build.import_arpa(arpa, str(root / "imported"), corpus, min_count=1)
    config = helpers.tiny_config(epochs=4, self_normalize=0.5, order=4)
    trainer.train_and_evaluate(config, str(root / "net"), corpus, verbose=0, export=False)
    return {"arpa": arpa, "imported": str(root / "imported"), "net": str(root / "net")}


def emissions(text: str, seed: int) -> np.ndarray:
    """CTC log-probabilities spelling `text` (a blank frame after each letter), a third of the letters in doubt
    with another letter."""
    rng = np.random.default_rng(seed)
    rows = []
    for char in text.replace(" ", "|"):
        row = np.full(len(TOKENS), 0.01)
        row[TOKENS.index(char)] = 0.6
        if rng.random() < 0.35:
            row[rng.integers(2, len(TOKENS))] += 0.45
        blank = np.full(len(TOKENS), 0.01)
        blank[0] = 1.0
        rows += [row / row.sum(), blank / blank.sum()]
    return np.log(np.array(rows, np.float32))


def decoders(model, arpa: str | None = None, beam: int = 50):
    from flashlight.lib.text.decoder import KenLM

    ours = flashlight_lm.lexicon_decoder(model, TOKENS, beam_size=beam, lm_weight=1.0, word_score=0.5)
    if arpa is None:
        return ours
    kenlm = KenLM(arpa, flashlight_lm.word_dictionary(model))
    return ours, flashlight_lm.lexicon_decoder(model, TOKENS, beam_size=beam, lm_weight=1.0, word_score=0.5, lm=kenlm)


@pytest.mark.parametrize("beam", [5, 50])
def test_it_decodes_what_flashlights_own_kenlm_decodes_on_the_file(models, beam):
    """Over the n-gram directory imported from an ARPA file, the same transcripts as flashlight's KenLM on the
    file, and the same scores within 1e-4, where the letters leave words in doubt."""
    model = nplm_tf.LanguageModel(models["imported"])
    ours, theirs = decoders(model, models["arpa"], beam)
    for seed, text in enumerate(TEXTS * 2):
        log_probs = emissions(text, seed)
        assert ours.decode(log_probs) == theirs.decode(log_probs), text
        assert ours.last.score == pytest.approx(theirs.last.score, abs=1e-4)
        assert ours.last.lmScore == pytest.approx(theirs.last.lmScore, abs=1e-4)


@pytest.mark.parametrize("word_score", [0.0, 5.0])
def test_words_end_at_the_boundary_and_the_last_word_is_kept(models, word_score):
    """Each spelling ends in the word boundary (torchaudio's lexicons' `the t h e |`): clean emissions decode to
    their words even where each word earns a large bonus (spellings without it let the decoder cut words out of
    the blank frames), and the last word, which no boundary frame follows, is kept."""
    from flashlight.lib.text.decoder import ZeroLM

    model = nplm_tf.LanguageModel(models["imported"])
    assert flashlight_lm.lexicon(model, TOKENS[2:])["cat"] == ["c", "a", "t", "|"]
    decoder = flashlight_lm.lexicon_decoder(
        model, TOKENS, beam_size=20, lm_weight=0.0, word_score=word_score, lm=ZeroLM()
    )
    for seed, text in enumerate(TEXTS):
        assert decoder.decode(emissions(text, seed)) == text.split(), text


def test_one_state_a_context_and_forgotten_at_each_start(models):
    model = nplm_tf.LanguageModel(models["imported"])
    words = flashlight_lm.word_dictionary(model)
    lm = flashlight_lm.FlashlightLM(model, words)
    start = lm.start(False)
    the, cat, a = (words.get_index(w) for w in ("the", "cat", "a"))
    via_the = lm.score(lm.score(start, the)[0], cat)[0]
    via_a = lm.score(lm.score(start, a)[0], cat)[0]
    assert via_the is not via_a  # "the cat" and "a cat" are other contexts of a trigram
    again = lm.score(lm.score(via_the, the)[0], cat)[0]
    assert lm.score(lm.score(via_a, the)[0], cat)[0] is again  # "... the cat" twice: one state
    assert lm.finish(again)[1] == pytest.approx(
        model.score("the cat the cat") - model.score("the cat the cat", eos=False)
    )
    assert len(lm._states) > 3
    lm.start(True)
    assert len(lm._states) == len(lm._contexts) == 1


def decode_all(args) -> list[list[str]]:
    path, normalized, texts = args
    decoder = decoders(nplm_tf.LanguageModel(path, normalized=normalized))
    return [decoder.decode(emissions(text, seed)) for seed, text in enumerate(texts)]


@pytest.mark.parametrize("kind", ["imported", "net"])
def test_two_threads_and_two_processes_decode_what_one_decodes(models, kind):
    """An n-gram and a self-normalized network scored raw: two threads (each its decoder, one shared model) and
    a fork pool of two give the sequential transcripts."""
    normalized = kind != "net"
    model = nplm_tf.LanguageModel(models[kind], normalized=normalized, cache_size=16)
    alone = [decoders(model).decode(emissions(text, seed)) for seed, text in enumerate(TEXTS)]
    assert all(alone)

    def thread(_):
        decoder = decoders(model)
        return [decoder.decode(emissions(text, seed)) for seed, text in enumerate(TEXTS)]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert list(pool.map(thread, range(2))) == [alone, alone]
    assert len(model._cache) <= 16
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(decode_all, [(models[kind], normalized, TEXTS)] * 2) == [alone, alone]


def test_bad_input_is_one_sentence(models):
    model = nplm_tf.LanguageModel(models["imported"])
    with pytest.raises(UserError, match="none of the model's 20 words can be spelled in these 3 tokens"):
        flashlight_lm.lexicon_decoder(model, ["-", "|", "x", "y", "z"])
    with pytest.raises(UserError, match="the tokens need the blank '-' and the word boundary '|'"):
        flashlight_lm.lexicon_decoder(model, [" ", *"abcdefghijklmnopqrstuvwxyz."])
    decoder = decoders(model)
    with pytest.raises(UserError, match=f"the emissions have 3 columns, the tokens {len(TOKENS)}"):
        decoder.decode(np.zeros((4, 3), np.float32))
    assert os.path.isfile(models["arpa"])
