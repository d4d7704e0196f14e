import os

import pytest

from pipelines import corpora, corpus, corpus_flags, vocabulary
from pipelines.errors import UserError
from tests import helpers


@pytest.fixture(scope="module")
def brown():
    os.environ.setdefault("NLTK_DATA", helpers.SHARED_NLTK)
    return corpus.brown_corpus()


def test_brown_protocol_counts(brown):
    """The Brown protocol (benchmarks/README.md): 348/85/67 texts; 800,571/199,995/161,126 predicted tokens; |V| = 14,118."""
    expected = {"train": (348, 800_571), "valid": (85, 199_995), "test": (67, 161_126)}
    for name, (texts, predicted) in expected.items():
        _, tokens, lines = vocabulary.count_split(brown[name])
        assert (lines, tokens + lines) == (texts, predicted), name
    assert vocabulary.build(brown["train"], 4).size == 14_118


def test_brown_tokens_equal_nltk_words():
    texts = corpus.read_brown_texts()
    assert len(texts) == 500 and texts[0][0] == "ca01" and texts[-1][0] == "cr09"
    assert sum(len(t) for _, t in texts) == 1_161_192
    assert texts[0][1][:4] == ["The", "Fulton", "County", "Grand"]


def test_missing_brown_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    monkeypatch.setattr(corpus, "nltk_data_paths", lambda: [str(tmp_path)])
    with pytest.raises(corpus.CorpusError, match="nltk.downloader brown"):
        corpus.brown_corpus()


def test_tokenize_matches_tensorflow():
    import tensorflow as tf

    line = " a\tb  c\x0bd\x0ce\rf \u00a0g "
    assert corpus.tokenize(line) == [t.decode() for t in tf.strings.split(line).numpy()]


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\nbad \xff\xfe here\n")
    split = corpus.file_split(str(path))
    with pytest.raises(corpus.CorpusError, match=r"bad\.txt line 2 is not valid UTF-8"):
        list(split.iter_lines())


def test_empty_file_is_refused(tmp_path):
    path = helpers.write_lines(str(tmp_path / "empty.txt"), ["", "  "])
    with pytest.raises(corpus.CorpusError, match="empty.txt is empty"):
        corpus.check_split(corpus.file_split(path), order=3)


def test_file_with_no_line_as_long_as_n_is_refused(tmp_path):
    path = helpers.write_lines(str(tmp_path / "short.txt"), ["a b", "c"])
    corpus.check_split(corpus.file_split(path), order=2)
    with pytest.raises(corpus.CorpusError, match="no line of at least 3 tokens"):
        corpus.check_split(corpus.file_split(path), order=3)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(corpus.CorpusError, match="no file matches"):
        corpus.file_split(str(tmp_path / "nope*.txt"))
    with pytest.raises(corpus.CorpusError, match=f"'{tmp_path}' is a directory; give its files"):
        corpus.file_split(str(tmp_path))


def test_vocabulary_order_min_count_and_round_trip(tmp_path):
    split = corpus.Split("train", lines=("b a b c", "a b <unk>"))
    vocab = vocabulary.build(split, 2)
    assert vocab.words == ("</s>", "<unk>", "b", "a")
    assert vocab.counts == (2, 2, 3, 2)  # 2 lines; c and the literal <unk> merged
    vocab.save(str(tmp_path / "vocab.tsv"))
    assert vocabulary.Vocabulary.load(str(tmp_path / "vocab.tsv")) == vocab
    import tensorflow as tf

    tokens = ["a", "zzz", "</s>", "<unk>", "<s>", "b"]
    assert vocab.ids(tokens) == [3, 1, 1, 1, 1, 2]  # a literal </s> is unknown text, as in the window pipeline
    assert vocab.lookup_table().lookup(tf.constant(tokens)).numpy().tolist() == vocab.ids(tokens)
    with pytest.raises(
        corpus.CorpusError,
        match=r"min_count=4 keeps no word of the train split \(its most frequent word occurs 3 times\)",
    ):
        vocabulary.build(split, 4)


def test_a_vocabulary_size_limit_keeps_the_most_frequent_words():
    split = corpus.Split("train", lines=("d b a b c c", "a b d e e e"))  # b, e: 3; a, c, d: 2
    assert vocabulary.build(split, 1).words == ("</s>", "<unk>", "b", "e", "a", "c", "d")
    capped = vocabulary.build(split, 1, max_size=5)
    assert capped.words == ("</s>", "<unk>", "b", "e", "a")  # the tie of a, c and d cut by string, as ordered
    assert capped.counts == (2, 4, 3, 3, 2)  # c and d are <unk> now
    assert vocabulary.build(split, 3, max_size=5).words == ("</s>", "<unk>", "b", "e")  # min_count applies too
    assert vocabulary.build(split, 1, max_size=7) == vocabulary.build(split, 1)  # a limit not reached changes nothing
    for size in (1, 2, -1):
        with pytest.raises(UserError, match=rf"^max_vocab={size} must be 0 \(no limit\) or at least 3"):
            vocabulary.build(split, 1, max_size=size)


@pytest.mark.parametrize(
    "text,message",
    [
        (b"</s>\t3\n<unk>\t0\nthe\n", "line 3 is not word<TAB>count"),
        (b"</s>\t3\n<unk>\tmany\n", "line 2 is not word<TAB>count"),
        (b"</s>\t3\n<unk>\t0\n\xff\t2\n", "is not UTF-8 text"),
        (b"the\t3\n", "does not start with </s> and <unk>"),
        (b"", "does not start with </s> and <unk>"),
    ],
)
def test_a_damaged_vocabulary_file_is_one_sentence(tmp_path, text, message):
    """A model directory's vocab.tsv edited since it was written: once a ValueError traceback from unpacking."""
    path = tmp_path / "vocab.tsv"
    path.write_bytes(text)
    with pytest.raises(corpus.CorpusError, match=message):
        vocabulary.Vocabulary.load(str(path))


def test_file_globs_take_spaces_a_leading_tilde_and_read_a_file_matched_twice_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    a = helpers.write_lines(str(tmp_path / "a.txt"), ["one two three"])
    b = helpers.write_lines(str(tmp_path / "b.txt"), ["four five six"])
    # A shell leaves ~ alone in `--train_files=~/a.txt`; a space after a comma is easy to type.
    assert corpus.expand_files("~/a.txt, ~/*.txt,", "train_files") == (a, b)
    assert corpus.expand_files(f"{tmp_path}/./b.txt,{b}", "train_files") == (f"{tmp_path}/./b.txt",)
    split = corpus.file_split(f"{a},{tmp_path}/*.txt")
    assert [line.strip() for line in split.iter_lines()] == ["one two three", "four five six"]
    with pytest.raises(corpus.CorpusError, match="--train_files is empty"):
        corpus.expand_files(" , ", "train_files")


def test_the_files_valid_and_test_share_with_train_are_named(tmp_path):
    a, b, c = (helpers.write_lines(str(tmp_path / f"{n}.txt"), ["x y z"]) for n in "abc")
    assert corpus.files_shared_with_train(corpus.files_corpus(a, b, c)) == {}
    shared = corpus.files_shared_with_train(corpus.files_corpus(f"{a},{b}", f"{tmp_path}/./b.txt", f"{a},{c}"))
    assert shared == {"valid": [f"{tmp_path}/./b.txt"], "test": [a]}
    in_memory = corpus.Corpus("lines", {s: corpus.Split(s, lines=("x y z",)) for s in corpus.SPLITS})
    assert corpus.files_shared_with_train(in_memory) == {}


def test_a_corpus_read_from_python_remembers_how_to_read_it_again_from_anywhere(tmp_path, monkeypatch):
    assert corpus.brown_corpus().spec == {"corpus": "brown"}  # NLTK's Brown: the flags can name it
    assert corpus.brown_corpus(corpus.find_brown_zip()).spec is None  # a zip named in Python: they cannot
    # (before the test leaves the working directory, which a relative NLTK_DATA, as CI's, is read from)
    for name in ("train", "valid", "test"):
        helpers.write_lines(str(tmp_path / f"{name}.txt"), [f"{name} line"])
    monkeypatch.chdir(tmp_path)
    made = corpus.files_corpus("train.txt", "*a*.txt, valid.txt", "test.txt")
    assert made.spec == {
        "corpus": "files",
        "train_files": f"{tmp_path}/train.txt",
        "valid_files": f"{tmp_path}/*a*.txt,{tmp_path}/valid.txt",
        "test_files": f"{tmp_path}/test.txt",
    }
    monkeypatch.chdir(os.path.dirname(tmp_path))
    again = corpora.corpus_from_spec(made.spec)
    assert again.spec == made.spec and again.splits["valid"].files == (f"{tmp_path}/train.txt", f"{tmp_path}/valid.txt")


def test_the_corpus_of_a_model_directory_is_read_from_python_with_no_flags_parsed(tmp_path, capsys):
    """Library code (the scorer behind query and rescore) reads a run's corpus through the corpus flags;
    called from Python, where no flags were parsed, it once failed on the first flag it read."""
    from absl import flags

    assert not flags.FLAGS.is_parsed()  # as in a user's program
    for name in ("train", "valid", "test"):
        helpers.write_lines(str(tmp_path / f"{name}.txt"), [f"{name} line"])
    spec = corpus.files_corpus(*(str(tmp_path / f"{name}.txt") for name in ("train", "valid", "test"))).spec
    read = corpus_flags.corpus_from_flags(spec, str(tmp_path))
    assert read.spec == spec and capsys.readouterr().err == ""
    default = corpus_flags.corpus_from_flags(None, str(tmp_path))  # no corpus.json: the default, said
    assert default.name == "brown" and "reading --corpus=brown, the default" in capsys.readouterr().err
