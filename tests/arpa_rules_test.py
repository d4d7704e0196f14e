"""ARPA files written to exercise each back-off rule, read by the import and by the `kenlm` module alike.

A generator writes back-off files the way a hand would write KenLM's own test file: back-off weights on
n-grams made of `<unk>` and on contexts nothing follows, `<s>` opening contexts of every order, an n-gram
whose suffix is not listed, unigrams that do not sum to one, back-offs left out and written as zero. The
`kenlm` module reads each file and is the reference, call for call, for every consumer of the import: the
n-gram's own queries (evaluate, mixtures), `LanguageModel`, the serving graph (the SavedModel) and a short
list's tail."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from nplm_tf.baselines import build
from nplm_tf.baselines import kneser_ney as kn
from pipelines import corpus as corpus_lib
from pipelines import vocabulary as vocab_lib
from tests import helpers

kenlm = pytest.importorskip("kenlm")

WORDS = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
OUTSIDE = ("zz", "yy")  # words no file lists: <unk> in both tools


def close(grams: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """`grams` with every prefix and suffix of each."""
    todo, closed = list(grams), set(grams)
    while todo:
        gram = todo.pop()
        for part in (gram[:-1], gram[1:]):
            if part and part not in closed:
                closed.add(part)
                todo.append(part)
    return closed


def random_file(path: str, seed: int, order: int = 4) -> dict[tuple[str, ...], tuple[float, float | None]]:
    """Writes a back-off file of `order` and returns n-gram -> (log10 p, log10 β or None when left out).

    Every listed context is listed (KenLM requires it); one n-gram of order 3 or more has its suffix
    unlisted (KenLM fills such a gap with a blank, as the import does). Probabilities and back-offs are drawn
    freely, so the file is not normalized: the rules alone decide every number."""
    rng = np.random.default_rng(seed)
    vocab = ("</s>", "<unk>") + WORDS
    grams: set[tuple[str, ...]] = {(w,) for w in vocab} | {("<s>",)}
    forced = [("<unk>", "<unk>"), ("<unk>", "a"), ("<s>", "<unk>", "<unk>"), ("<s>", "a", "<unk>"), ("b", "<unk>", "c")]
    grams |= {g[:order] for g in forced}
    for k in range(2, order + 1):
        contexts = sorted(g for g in grams if len(g) == k - 1 and g[-1] != "</s>")
        for i in rng.choice(len(contexts), size=min(len(contexts), 25), replace=False):
            for w in rng.choice(vocab, size=int(rng.integers(1, 4)), replace=False):
                grams.add(contexts[i] + (str(w),))
        grams = close(grams)
    # One suffix left out: an (order-1)-gram no n-gram extends but one n-gram ends with.
    extended = {g[:-1] for g in grams}
    ends = sorted({g[1:] for g in grams if len(g) == order} - extended - {g[1:] for g in forced})
    ends = [g for g in ends if len(g) >= 2 and g[0] != "<s>"]
    grams.discard(ends[int(rng.integers(len(ends)))])
    entries = {}
    for gram in sorted(grams, key=lambda g: (len(g), g)):
        logp = -99.0 if gram == ("<s>",) else round(float(rng.uniform(-2.5, -0.05)), 6)
        if len(gram) == order or gram[-1] == "</s>":
            backoff = None
        else:
            backoff = round(float(rng.uniform(-1.5, 0.3)), 6) if rng.random() < 0.8 else rng.choice([None, 0.0])
        entries[gram] = (logp, None if backoff is None else float(backoff))
    entries[("<unk>",)] = (-1.9, -2.0)
    entries[("<unk>", "<unk>")] = (-1.5, -0.7)  # a back-off on n-grams of <unk>, followed by nothing
    helpers.write_arpa(
        path, entries, order, lambda g, p, b: f"{p}\t{' '.join(g)}" + ("" if b is None else f"\t{b}") + "\n"
    )
    return entries


def sentences(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    pool = WORDS + OUTSIDE + ("<unk>",) * 3
    return [" ".join(rng.choice(pool, size=int(rng.integers(0, 9)))) for _ in range(count)]


def kenlm_state(model, context: tuple[str, ...]):
    """The `kenlm` module's state after `context` (from the sentence's start when it opens with `<s>`)."""
    state, out = kenlm.State(), kenlm.State()
    start = context[:1] == ("<s>",)
    (model.BeginSentenceWrite if start else model.NullContextWrite)(state)
    for word in context[1:] if start else context:
        model.BaseScore(state, str(word), out)
        state, out = out, state
    return state


def import_file(root, seed: int, order: int) -> tuple[str, str, dict[str, str]]:
    """A generated file and its import as an n-gram directory over a vocabulary of every word the file lists
    (the model's `<unk>` then being the file's), with the corpus files the import read."""
    path = str(root / "rules.arpa")
    random_file(path, seed, order)
    paths = {"train": helpers.write_lines(str(root / "train.txt"), [" ".join(WORDS)] * 3)}
    for name in ("valid", "test"):
        paths[name] = helpers.write_lines(str(root / f"{name}.txt"), sentences(seed + 7, 5))
    corpus = corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])
    directory = str(root / "imported")
    build.import_arpa(path, directory, corpus, min_count=1)
    assert vocab_lib.Vocabulary.load(os.path.join(directory, "vocab.tsv")).size == len(WORDS) + 2
    return path, directory, paths


@pytest.fixture(scope="module", params=[(0, 4), (1, 3), (2, 5)], ids=lambda p: f"seed{p[0]}-order{p[1]}")
def imported(request, tmp_path_factory):
    """The `kenlm` module on a generated file, and the file's import."""
    path, directory, _ = import_file(tmp_path_factory.mktemp("rules"), *request.param)
    return kenlm.Model(path), directory


def test_the_import_scores_every_sentence_as_kenlm(imported):
    """`LanguageModel.full_scores` (log10 P, n-gram length, OOV) and the n-gram's `token_probabilities` (what
    `evaluate` and the mixtures read) give the `kenlm` module's numbers on random sentences."""
    import nplm_tf

    theirs, directory = imported
    ours = nplm_tf.LanguageModel(directory)
    model, vocab = build.load(directory), vocab_lib.Vocabulary.load(os.path.join(directory, "vocab.tsv"))
    index = {w: i for i, w in enumerate(vocab.words)}
    for sentence in sentences(11, 200):
        expected = list(theirs.full_scores(sentence))
        got = list(ours.full_scores(sentence))
        np.testing.assert_allclose([g[0] for g in got], [e[0] for e in expected], rtol=0, atol=1e-6, err_msg=sentence)
        assert [g[1:] for g in got] == [tuple(e[1:]) for e in expected], sentence
        ids = [index.get(w, vocab.unk_id) for w in sentence.split()]
        tokens = model.token_probabilities(kn.TokenArrays.from_lines([ids], model.bos_id, 0))
        np.testing.assert_allclose(np.log10(tokens), [e[0] for e in expected], rtol=0, atol=1e-6, err_msg=sentence)


def test_states_score_call_for_call_as_kenlm(imported):
    """BeginSentenceWrite, NullContextWrite and BaseScore chains: the same log10 P at every call, `</s>` and
    unknown words included."""
    import nplm_tf

    theirs, directory = imported
    ours = nplm_tf.LanguageModel(directory)
    rng = np.random.default_rng(3)
    pool = WORDS + OUTSIDE + ("<unk>", "</s>")
    for start in ("BeginSentenceWrite", "NullContextWrite"):
        for _ in range(60):
            a, b = kenlm.State(), kenlm.State()
            getattr(theirs, start)(a)
            x, y = nplm_tf.State(), nplm_tf.State()
            getattr(ours, start)(x)
            for word in rng.choice(pool, size=int(rng.integers(1, 8))):
                expected = theirs.BaseScore(a, str(word), b)
                assert ours.BaseScore(x, str(word), y) == pytest.approx(expected, abs=1e-6), (start, word)
                a, b, x, y = b, a, y, x


def test_every_distribution_is_kenlms_word_by_word(imported):
    """P(· | h) over the whole vocabulary for contexts of every length: the n-gram's `distribution` (LanguageModel,
    a short list's NumPy tail) and the serving graph's `distribution` and `token_probabilities` (the SavedModel),
    each word's number the `kenlm` module's after that context."""
    import tensorflow as tf

    from nplm_tf.baselines import ngram_graph

    theirs, directory = imported
    model, vocab = build.load(directory), vocab_lib.Vocabulary.load(os.path.join(directory, "vocab.tsv"))
    graph = ngram_graph.ServingKneserNey(model, [0.5])
    c = max(model.order - 1, 1)
    rng = np.random.default_rng(5)
    contexts = [("<unk>", "<unk>"), ("<s>", "<unk>", "<unk>"), ("<s>",), ("<s>", "a")]
    contexts += [tuple(map(str, rng.choice(("<s>",) + WORDS + ("<unk>",), size=c))) for _ in range(40)]
    rows = []
    for context in contexts:
        context = context[-c:]
        if "<s>" in context:  # nothing before a sentence's start
            context = context[context.index("<s>") :]
        state, out = kenlm_state(theirs, context), kenlm.State()
        expected = np.array([theirs.BaseScore(state, w, out) for w in vocab.words])
        ids = [vocab.bos_id if w == "<s>" else vocab.words.index(w) for w in context]
        np.testing.assert_allclose(np.log10(model.distribution(ids)), expected, rtol=0, atol=1e-6, err_msg=str(context))
        if context[:1] == ("<s>",):  # the graph pads a line's start with <s>
            rows.append((([vocab.bos_id] * c + ids)[-c:], expected))
        elif len(ids) == c:  # and reads full-width contexts otherwise
            rows.append((ids, expected))
    full = rows
    context = tf.constant([r for r, _ in full], tf.int64)
    np.testing.assert_allclose(np.log10(graph.distribution(context).numpy()), [e for _, e in full], rtol=0, atol=1e-6)
    for w in range(vocab.size):
        got = graph.token_probabilities(context, tf.fill([len(full)], tf.constant(w, tf.int64))).numpy()
        np.testing.assert_allclose(np.log10(got), [e[w] for _, e in full], rtol=0, atol=1e-6)


def test_a_short_list_tails_list_mass_is_the_sum_of_kenlms_probabilities(imported):
    """The short list's list mass m(C) = Σ_{w<N} P(w | C) (its recursion through the back-offs) against the sum of
    the `kenlm` module's P over the list words."""
    import tensorflow as tf

    from nplm_tf.network import heads

    theirs, directory = imported
    model, vocab = build.load(directory), vocab_lib.Vocabulary.load(os.path.join(directory, "vocab.tsv"))
    c = max(model.order - 1, 1)
    tail = heads.named("backoff", 6, model.vocab_size, model)
    words = ("<s>",) + WORDS + ("<unk>",)
    contexts = [("<unk>",) * c] + [tuple(x) for x in itertools.islice(itertools.product(words, repeat=c), 0, None, 7)]
    contexts = [ctx for ctx in contexts if "<s>" not in ctx[1:]][:60]
    expected = []
    for context in contexts:
        state, out = kenlm_state(theirs, context), kenlm.State()
        expected.append(sum(10 ** theirs.BaseScore(state, w, out) for w in vocab.words[:6]))
    ids = [[vocab.bos_id if w == "<s>" else vocab.words.index(w) for w in ctx] for ctx in contexts]
    mass = tail.graph_state().list_mass(tf.constant(ids, tf.int64)).numpy()
    np.testing.assert_allclose(mass, expected, rtol=1e-6)


def test_query_and_a_mixtures_savedmodel_read_the_import_as_kenlm(tmp_path):
    """Through the binaries: `query --ngram_only` prints the `kenlm` module's log10 P; a network mixed with the
    import (`evaluate --save_mixture`, then `export`) serves `next_word` probabilities equal to what its `score`
    gives each word after the same context (the graph's distributions against its per-token path), contexts
    with back-offs and nothing after them included."""
    import tensorflow as tf

    path, directory, paths = import_file(tmp_path, 1, 3)
    model_dir = str(tmp_path / "m")
    trained = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={model_dir}", "--epochs=1", *helpers.TINY_FLAGS, *helpers.files_flags(paths)
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    lines = ["a <unk> <unk> b", "zz zz c", "<unk> <unk>", "b <unk> c d", ""]
    queried = helpers.run_binary(
        "nplm_tf.query",
        f"--model_dir={model_dir}",
        f"--ngram_dir={directory}",
        "--ngram_only",
        input="".join(line + "\n" for line in lines),
    )
    assert queried.returncode == 0, queried.stderr[-2000:]
    theirs = kenlm.Model(path)
    for line, printed in zip(lines, queried.stdout.splitlines()):
        got = [float(field.split(" ")[-1]) for field in printed.split("\t")[:-1]]
        np.testing.assert_allclose(got, [s[0] for s in theirs.full_scores(line)], rtol=1e-5, err_msg=line)
    for binary, *flags in [("nplm_tf.evaluate", f"--ngram_dir={directory}", "--save_mixture"), ("nplm_tf.export",)]:
        result = helpers.run_binary(binary, f"--model_dir={model_dir}", *flags)
        assert result.returncode == 0, result.stderr[-2000:]
    exports = os.path.join(model_dir, "export")
    served = tf.saved_model.load(os.path.join(exports, max(os.listdir(exports), key=int)))  # the mixture's
    vocab = vocab_lib.Vocabulary.load(os.path.join(model_dir, "vocab.tsv"))
    words = [w for w in vocab.words if w != "</s>"]
    for context in ["<unk> <unk>", "a <unk> <unk>", "h <unk>", "j d", "zz h e"]:
        top = served.signatures["next_word"](text=tf.constant([context]), k=tf.constant(vocab.size))
        offered = dict(zip((w.decode() for w in top["words"].numpy()[0]), top["probabilities"].numpy()[0]))
        out = served.signatures["score"](text=tf.constant([f"{context} {w}" for w in words]))
        position = len(context.split())
        np.testing.assert_allclose(
            [offered[w] for w in words], np.exp(out["token_log_probs"].numpy()[:, position]), rtol=1e-5, err_msg=context
        )
