"""ARPA import: any back-off file read into an n-gram directory every command takes, exactly."""

import json
import math
import os

import numpy as np
import pytest

from nplm_tf.baselines import arpa, arpa_tables, build
from nplm_tf.baselines import kneser_ney as kn
from pipelines import corpus as corpus_lib
from pipelines import vocabulary as vocab_lib
from tests import helpers


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    paths = helpers.tiny_corpus_files(tmp_path_factory.mktemp("arpa"), train=150, valid=20, test=20)
    return corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"]), paths


def kenlm_log10(model_path: str, split) -> np.ndarray:
    import kenlm

    model = kenlm.Model(model_path)
    scores = []
    for line in split.iter_lines():
        tokens = corpus_lib.tokenize(line)
        if tokens:
            scores += [s[0] for s in model.full_scores(" ".join(tokens))]
    return np.array(scores)


def split_probs(directory: str, corpus_) -> dict:
    model, vocab = build.load(directory), vocab_lib.Vocabulary.load(os.path.join(directory, "vocab.tsv"))
    return {name: model.token_probabilities(build.token_arrays(corpus_[name], vocab)) for name in corpus_lib.SPLITS}


@pytest.mark.parametrize("order,prune", [(1, ()), (2, ()), (3, ()), (5, ()), (3, (0, 1)), (4, (0, 0, 1))])
def test_an_exported_arpa_reads_back_as_the_model_that_wrote_it(order, prune, corpus, tmp_path):
    """ngram → model.arpa → import: every split's per-token probabilities to 1e-9 in ln P, the λ buckets'
    context counts equal, and (KenLM reads orders 2 and up) the `kenlm` module's log10 P within 1e-6."""
    original, imported = str(tmp_path / "kn"), str(tmp_path / "imported")
    build.train_ngram(order, original, corpus[0], min_count=1, prune=prune)
    metrics = build.import_arpa(os.path.join(original, "model.arpa"), imported, corpus[0], min_count=1)
    before, after = split_probs(original, corpus[0]), split_probs(imported, corpus[0])
    for name in corpus_lib.SPLITS:
        np.testing.assert_allclose(np.log(after[name]), np.log(before[name]), rtol=0, atol=1e-9)
    a, b = build.load(original), build.load(imported)
    np.testing.assert_array_equal(a.context_totals(), b.context_totals())
    for k in range(1, order + 1):
        np.testing.assert_array_equal(a.orders[k].keys, b.orders[k].keys)
    assert metrics["model"] == "arpa" and metrics["order"] == order and not metrics["warnings"]
    if order >= 2:
        for name in ("valid", "test"):
            kenlm = kenlm_log10(os.path.join(original, "model.arpa"), corpus[0][name])
            np.testing.assert_allclose(np.log10(after[name]), kenlm, rtol=0, atol=1e-6)
        import kenlm

        import nplm_tf

        ours, theirs = nplm_tf.LanguageModel(imported), kenlm.Model(os.path.join(original, "model.arpa"))
        for line in list(corpus[0]["test"].iter_lines())[:5]:
            assert ours.score(line) == pytest.approx(theirs.score(line), abs=1e-5)


# ------------------------------------------------------------- written by hand --

VOCAB = vocab_lib.Vocabulary(("</s>", "<unk>", "a", "b", "c"), (3, 0, 5, 4, 3))


def reference_log10(entries: dict, context: tuple, word: str) -> float:
    """ARPA's meaning, written plainly: p(h w) where listed, else β(h) (0 when h is unlisted or has no back-off)
    plus the answer for the shorter context; a word the file lacks gets `arpa.MISSING_LOG10`."""
    if context + (word,) in entries:
        return entries[context + (word,)][0]
    if not context:
        return arpa.MISSING_LOG10
    return entries.get(context, (0.0, 0.0))[1] + reference_log10(entries, context[1:], word)


def normalized_file(path: str, listed: dict, top: int) -> dict:
    """Writes an ARPA file of the n-grams `listed` (tuple -> log10 p) whose back-off weights make every listed
    context's distribution sum to one over the file's words; returns tuple -> (log10 p, log10 β)."""
    words = [w for (w,) in (k for k in listed if len(k) == 1) if w != "<s>"]
    entries = {k: (p, 0.0) for k, p in listed.items()}
    for context in sorted({k[:-1] for k in listed if len(k) > 1}, key=len):
        if context not in entries:
            continue  # an unlisted context: β = 1
        seen = [w for w in words if context + (w,) in listed]
        own = sum(10 ** listed[context + (w,)] for w in seen)
        lower = sum(10 ** reference_log10(entries, context[1:], w) for w in seen)
        entries[context] = (entries[context][0], math.log10((1 - own) / (1 - lower)))

    def line(gram, p, b):
        backoff = f"\t{b!r}" if len(gram) < top and (b != 0.0 or gram == ("c", "a")) else ""
        return f"{p!r}\t{' '.join(gram)}{backoff}\n"

    helpers.write_arpa(path, entries, top, line)
    return entries


def hand_written(path: str) -> dict:
    """<unk> missing; "b c" a context with no back-off field; "c" after "a" seen only in the trigram "c a c" (the
    bigram "a c", its suffix, unlisted); "b b a" whose context "b b" is unlisted (its probability then has to be
    what back-off gives for the file to stay normalized)."""
    uni = {"</s>": 0.25, "a": 0.35, "b": 0.25, "c": 0.15}
    listed = {(w,): math.log10(p) for w, p in uni.items()} | {("<s>",): -99.0}
    listed |= {("<s>", "a"): math.log10(0.6), ("a", "b"): math.log10(0.5), ("b", "c"): math.log10(0.4)}
    listed |= {("c", "a"): math.log10(0.5), ("c", "</s>"): math.log10(0.3), ("b", "a"): math.log10(0.3)}
    listed |= {("<s>", "a", "b"): math.log10(0.7), ("c", "a", "c"): math.log10(0.45)}
    entries = normalized_file(path, listed, 3)
    # "b b a": p = β(b) P(a | ...) as back-off has it (an unlisted context keeps β = 1)
    p = reference_log10(entries, ("b",), "a")
    text = open(path, encoding="utf-8").read().replace("ngram 3=2", "ngram 3=3")
    text = text.replace("\n\n\\end\\", f"\n{p!r}\tb b a\n\n\\end\\")
    open(path, "w", encoding="utf-8").write(text)
    entries[("b", "b", "a")] = (p, 0.0)
    return entries


def test_a_hand_written_file_means_what_arpa_says_and_each_distribution_sums_to_one(tmp_path):
    path = str(tmp_path / "hand.arpa")
    entries = hand_written(path)
    model, warnings = arpa.read_arpa(path, VOCAB)
    assert any("<unk>" in w and "-100" in w for w in warnings)  # the rule for a word the file lacks, said
    assert any("added with the probability back-off gives" in w for w in warnings)
    words = ["</s>", "<unk>", "a", "b", "c"]
    ids = {w: i for i, w in enumerate(words)} | {"<s>": 5}
    contexts = [(), ("a",), ("b",), ("c",), ("<s>",), ("<s>", "a"), ("c", "a"), ("b", "c"), ("b", "b"), ("a", "a")]
    for context in contexts:
        probs = model.distribution([ids[w] for w in context])
        expected = [10 ** reference_log10(entries, context, w) for w in words]
        np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=1e-300)
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert model.distribution([ids["c"], ids["a"]])[ids["c"]] == pytest.approx(0.45)  # the listed trigram wins
    data = kn.TokenArrays.from_lines([[2, 3, 4], [4, 2, 4], [3, 3, 2, 1]], 5, 0)
    tokens = model.token_probabilities(data)
    text = [("a", "b", "c"), ("c", "a", "c"), ("b", "b", "a", "<unk>")]
    expected = []
    for line in text:
        padded = ("<s>",) + line + ("</s>",)
        expected += [
            10 ** reference_log10(entries, padded[max(0, i - 2) : i], padded[i]) for i in range(1, len(padded))
        ]
    np.testing.assert_allclose(tokens, expected, rtol=1e-12)


def test_kenlm_reads_the_hand_written_file_as_the_import_does(tmp_path):
    """KenLM refuses an n-gram whose context is unlisted ("The context of every 3-gram should appear as a
    2-gram"), which SRILM's pruning writes and the import fills in: the file without "b b a" is compared."""
    import kenlm

    path = str(tmp_path / "hand.arpa")
    hand_written(path)
    lines = open(path, encoding="utf-8").read().replace("ngram 3=3", "ngram 3=2").split("\n")
    open(path, "w", encoding="utf-8").write("\n".join(line for line in lines if not line.endswith("\tb b a")))
    model, _ = arpa.read_arpa(path, VOCAB)
    lm = kenlm.Model(path)
    for sentence in ["a b c", "c a c", "b b a", "b c a", "a a b", "c <unk> a"]:
        ids = [VOCAB.words.index(w) for w in sentence.split()]
        ours = np.log10(model.token_probabilities(kn.TokenArrays.from_lines([ids], 5, 0)))
        theirs = [s[0] for s in lm.full_scores(sentence)]
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5, err_msg=sentence)


def test_words_outside_the_vocabulary_that_the_file_only_predicts_are_added_to_unk(corpus, tmp_path):
    """An lmplz-like file: built on the text `describe --write_text --unk_token=UNKWORD` writes, so UNKWORD
    carries the unknown words and the file's own <unk> the mass smoothing gave it. Read with
    --unk_token=UNKWORD, P(<unk> | h) is P(UNKWORD | h) + P(<unk> | h) of the file, every distribution sums to
    one over the model's vocabulary, and the other words keep the file's probabilities."""
    vocab = vocab_lib.build(corpus[0]["train"], 1, max_size=10)  # 8 words of the 18: the others unknown
    text_dir = str(tmp_path / "text")
    vocab_lib.write_splits(corpus[0], vocab, text_dir, "UNKWORD")
    written = corpus_lib.files_corpus(*(os.path.join(text_dir, f"{n}.txt") for n in corpus_lib.SPLITS))
    source = str(tmp_path / "source")
    build.train_ngram(3, source, written, min_count=1)  # its vocabulary: UNKWORD a word, <unk> never seen
    file_model = build.load(source)
    file_vocab = vocab_lib.Vocabulary.load(os.path.join(source, "vocab.tsv"))
    assert "UNKWORD" in file_vocab.words and vocab.size == 10
    model, warnings = arpa.read_arpa(os.path.join(source, "model.arpa"), vocab, "UNKWORD")
    assert any("outside the model's vocabulary ('<unk>')" in w for w in warnings)
    file_id = {w: i for i, w in enumerate(file_vocab.words)} | {"<s>": file_vocab.bos_id}
    words = list(vocab.words) + ["<s>"]
    rng = np.random.default_rng(0)
    for _ in range(30):
        context = rng.integers(0, vocab.size + 1, size=2).tolist()
        probs = model.distribution(context)
        assert probs.sum() == pytest.approx(1.0, abs=1e-9)
        spelled = ["UNKWORD" if words[i] == "<unk>" else words[i] for i in context]
        theirs = file_model.distribution([file_id[w] for w in spelled])
        expected = [
            theirs[file_id["UNKWORD"]] + theirs[file_id["<unk>"]] if w == "<unk>" else theirs[file_id[w]]
            for w in vocab.words
        ]
        np.testing.assert_allclose(probs, expected, rtol=1e-9)


def test_a_word_outside_the_vocabulary_in_a_context_is_refused_with_the_way_to_a_matching_file(corpus, tmp_path):
    source = str(tmp_path / "wide")
    build.train_ngram(2, source, corpus[0], min_count=1)
    narrow = vocab_lib.build(corpus[0]["train"], 1, max_size=10)
    with pytest.raises(
        arpa.ArpaError,
        match=r"line \d+: '.+', a word outside the model's vocabulary, is in a "
        r"context; build the ARPA file from the text `python -m pipelines.describe --write_text",
    ):
        arpa.read_arpa(os.path.join(source, "model.arpa"), narrow)


def test_a_short_list_tail_read_from_arpa_has_the_recursive_list_mass_and_sums_to_one(tmp_path):
    """The short list's tail over an imported model: the recursive list mass equals the brute-force sum, and
    P over the whole vocabulary sums to one (class and back-off tails)."""
    import tensorflow as tf

    from nplm_tf.network import heads

    size, rng = 30, np.random.default_rng(0)
    lines = [rng.integers(0, size, size=rng.integers(1, 15)).tolist() for _ in range(200)]
    original = kn.KneserNey(kn.TokenArrays.from_lines(lines, size, 0), 4, size)
    original.prune((0, 1))
    vocab = vocab_lib.Vocabulary(("</s>", "<unk>") + tuple(f"w{i}" for i in range(2, size)), (1,) * size)
    path = arpa.write_arpa(original, vocab, str(tmp_path / "m.arpa"))
    model, warnings = arpa.read_arpa(path, vocab)
    assert not warnings
    contexts = rng.integers(0, size + 1, size=(40, 4))
    contexts[:6, :3] = size  # line starts: <s> padding
    rows, targets = np.repeat(np.arange(40), size), np.tile(np.arange(size), 40)
    for kind in ("class", "backoff", "sigmoid"):
        tail = heads.named(kind, 12, model.vocab_size, model)
        brute = [model.distribution(list(c))[:12].sum() for c in contexts]
        np.testing.assert_allclose(
            tail.graph_state().list_mass(tf.constant(contexts)).numpy(), brute, rtol=0, atol=1e-12
        )
        logits = tf.random.stateless_normal([40, tail.output_size()], seed=[1, 2]) * 3
        ln_p = tail.log_prob(tf.gather(logits, rows), tf.constant(contexts[rows]), tf.constant(targets))
        np.testing.assert_allclose(np.exp(ln_p.numpy()).reshape(40, size).sum(axis=1), 1.0, atol=1e-5)


def test_a_short_list_trained_on_an_imported_tail_serves_a_normalized_distribution(corpus, tmp_path):
    """End to end through the binaries: `ngram --from_arpa`, `train --shortlist --ngram_dir` on it, `evaluate`,
    and the SavedModel: next_word over every word sums to one and score is evaluate's per token."""
    import tensorflow as tf

    flags, paths = helpers.files_flags(corpus[1]), corpus[1]
    source, imported, model_dir = (str(tmp_path / n) for n in ("kn3", "imported", "m"))
    assert (
        helpers.run_binary("nplm_tf.ngram", "--order=3", f"--output={source}", "--min_count=1", *flags).returncode == 0
    )
    result = helpers.run_binary(
        "nplm_tf.ngram", f"--from_arpa={source}/model.arpa", f"--output={imported}", "--min_count=1", *flags
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["order"] == 3
    trained = helpers.run_binary(
        "nplm_tf.train",
        f"--model_dir={model_dir}",
        "--epochs=1",
        "--shortlist=8",
        "--tail=backoff",
        f"--ngram_dir={imported}",
        *helpers.TINY_FLAGS,
        *flags,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    per_token = str(tmp_path / "tokens.tsv")
    evaluated = helpers.run_binary(
        "nplm_tf.evaluate", f"--model_dir={model_dir}", f"--files={paths['test']}", f"--per_token={per_token}"
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    expected = [float(line.split("\t")[1]) for line in open(per_token, encoding="utf-8")]
    served = tf.saved_model.load(os.path.join(model_dir, "export", "1"))
    lines = [line.strip() for line in open(paths["test"], encoding="utf-8") if line.strip()]
    out = served.signatures["score"](text=tf.constant(lines))
    np.testing.assert_allclose(out["token_log_probs"].numpy()[out["mask"].numpy()], expected, atol=1e-5)
    top = served.signatures["next_word"](text=tf.constant(["the cat", ""]), k=tf.constant(10_000))
    np.testing.assert_allclose(top["probabilities"].numpy().sum(axis=1), 1.0, atol=1e-5)
    mixtures = []  # the network mixed with the n-gram read back, and with the one that wrote the file
    for ngram_dir in (imported, source):
        mixed = helpers.run_binary("nplm_tf.evaluate", f"--model_dir={model_dir}", f"--ngram_dir={ngram_dir}")
        assert mixed.returncode == 0, mixed.stderr[-2000:]
        mixtures.append(json.loads(mixed.stdout.strip().splitlines()[-1])["mixture"])
    for kind in ("em", "context_frequency"):
        assert mixtures[0][kind]["perplexity"] == pytest.approx(mixtures[1][kind]["perplexity"], rel=1e-9)


# ------------------------------------------------------------------ bad input --

GOOD = (
    "\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n-0.6\t</s>\n-99\t<s>\t-0.3\n-0.5\ta\t-0.2\n-0.6\t<unk>\n\n"
    "\\2-grams:\n-0.2\t<s> a\n-0.4\ta </s>\n\n\\end\\\n"
)


@pytest.mark.parametrize(
    "text,message",
    [
        (GOOD[: GOOD.index("-0.4\ta </s>")], r"line 12: the file ends inside its 2-grams; it is truncated"),
        (GOOD.replace("\\end\\\n", ""), r"line 14: the file ends without \\end\\; it is truncated"),
        (GOOD.replace("ngram 2=2", "ngram 2=3"), r"line 11: \\2-grams: lists 2 n-grams, but \\data\\ says ngram 2=3"),
        (GOOD.replace("-0.5\ta\t-0.2", "-0.5\ta b\t-0.2"), r"line 8: 4 fields where a 1-gram line has 2 or 3"),
        (GOOD.replace("-0.4\ta </s>", "-0.4\ta </s>\t-0.1"), r"line 13: 4 fields where a 2-gram line has 3 \(log10 p"),
        (GOOD.replace("-0.5\ta", "x0.5\ta"), r"line 8: the log10 probability 'x0.5' is not a number"),
        (GOOD.replace("-0.5\ta", "0.5\ta"), r"line 8: the log10 probability 0.5 is positive"),
        (GOOD.replace("-0.2\t<s> a", "nan\t<s> a"), r"line 12: the log10 probability is not a number \(nan\)"),
        (GOOD.replace("-0.4\ta </s>", "-0.4\t<s> a"), r"line 13: the n-gram of line 12 is listed again"),
        ("just some text\nand more\n", r"is not an ARPA file: it has no \\data\\ line at its start"),
        (GOOD.replace("\\2-grams:", "\\3-grams:"), r"line 11: expected \\2-grams:, found '\\\\3-grams:'"),
    ],
)
def test_a_bad_file_is_refused_by_one_sentence_naming_its_line(text, message, tmp_path):
    path = tmp_path / "bad.arpa"
    path.write_text(text, encoding="utf-8")
    vocab = vocab_lib.Vocabulary(("</s>", "<unk>", "a"), (1, 1, 1))
    (tmp_path / "good.arpa").write_text(GOOD, encoding="utf-8")
    arpa.read_arpa(str(tmp_path / "good.arpa"), vocab)  # the file each case changes reads
    with pytest.raises(arpa.ArpaError, match=message):
        arpa.read_arpa(str(path), vocab)


def test_the_binary_refuses_a_bad_file_in_one_sentence_and_writes_nothing(corpus, tmp_path):
    flags = helpers.files_flags(corpus[1])
    bad = tmp_path / "bad.arpa"
    bad.write_bytes(GOOD.replace("-0.5\ta", "-0.5\t\xe9").encode("latin-1"))
    for path, message in [
        (bad, "line 8: not UTF-8 text; give an ARPA file in UTF-8."),
        (tmp_path / "missing.arpa", "does not exist; give a file."),
    ]:
        out = tmp_path / "out"
        result = helpers.run_binary("nplm_tf.ngram", f"--from_arpa={path}", f"--output={out}", *flags)
        helpers.assert_one_sentence(result, message)
        assert not out.exists()
    result = helpers.run_binary(
        "nplm_tf.ngram", f"--from_arpa={bad}", "--order=3", f"--output={tmp_path / 'o'}", *flags
    )
    helpers.assert_one_sentence(result, "--order cannot be given with --from_arpa: the file is the model.")


def test_chunk_boundaries_spaces_and_left_out_back_offs_read_the_same_model(corpus, tmp_path, monkeypatch):
    """The reader takes the file a chunk of lines at a time: chunks of 1, 2 and 7 lines (sections ending inside a
    chunk, lines read ahead and given back) give the model the default chunks give; so does the same file with
    spaces between its fields and without its zero back-offs (as SRILM leaves them out)."""
    source = str(tmp_path / "kn4")
    build.train_ngram(4, source, corpus[0], min_count=1, prune=(0, 1))
    vocab = vocab_lib.Vocabulary.load(os.path.join(source, "vocab.tsv"))
    path = os.path.join(source, "model.arpa")
    reference = arpa.read_arpa(path, vocab)[0].get_state()
    srilm = tmp_path / "srilm.arpa"
    lines = open(path, encoding="utf-8").read().split("\n")
    dropped = [line[: -len("\t0")] if line.endswith("\t0") else line for line in lines]
    assert dropped != lines
    srilm.write_text("\n".join(line.replace("\t", " ") for line in dropped), encoding="utf-8")
    for size, file in [(1, path), (2, path), (7, path), (arpa_tables.LINES_PER_CHUNK, str(srilm)), (3, str(srilm))]:
        monkeypatch.setattr(arpa_tables, "LINES_PER_CHUNK", size)
        state = arpa.read_arpa(file, vocab)[0].get_state()
        assert state.keys() == reference.keys()
        for name, value in reference.items():
            np.testing.assert_array_equal(state[name], value, err_msg=f"{name}, chunks of {size}, {file}")
