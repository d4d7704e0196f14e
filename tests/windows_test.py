import numpy as np
import pytest
import tensorflow as tf

from nplm_tf.training import data
from pipelines import corpus, vocabulary, windows


def vocab_of(lines, min_count=1):
    return vocabulary.build(corpus.Split("train", lines=tuple(lines)), min_count)


def all_windows(lines, order, **kwargs):
    split = corpus.Split("s", lines=tuple(lines))
    vocab = vocab_of(lines)
    tokens = sum(len(corpus.tokenize(line)) + 1 for line in lines if corpus.tokenize(line))
    ds = data.window_dataset(split, vocab, order, 4, tokens, **kwargs)
    pairs = [(tuple(c), t) for ctx, tgt in ds.as_numpy_iterator() for c, t in zip(ctx, tgt)]
    return vocab, pairs, ds


def test_exact_windows_with_padding_and_no_line_crossing():
    # ids: </s>=0 <unk>=1, then by count desc, then string: a=2 (3x), b=3 (2x), c=4, d=5; <s>=6
    vocab, pairs, _ = all_windows(["a b a", "c a b d"], order=3)
    assert vocab.words == ("</s>", "<unk>", "a", "b", "c", "d")
    S = vocab.bos_id
    assert S == 6
    # Contexts are in the text's order, oldest first: (w_{t-2}, w_{t-1}).
    assert pairs == [
        ((S, S), 2),
        ((S, 2), 3),
        ((2, 3), 2),
        ((3, 2), 0),  # "a b a </s>"
        ((S, S), 4),
        ((S, 4), 2),
        ((4, 2), 3),
        ((2, 3), 5),
        ((3, 5), 0),  # "c a b d </s>": restarts with <s>
    ]


def test_unknown_words_map_to_unk_and_blank_lines_are_skipped():
    split = corpus.Split("s", lines=("x y", "", "   ", "x zz"))
    vocab = vocabulary.build(corpus.Split("t", lines=("x x",)), 2)
    ds = data.window_dataset(split, vocab, 2, 8, 6)
    ctx, tgt = next(iter(ds))
    assert tgt.numpy().tolist() == [2, 1, 0, 2, 1, 0]  # x <unk> </s> x <unk> </s>
    assert ctx.numpy()[:, 0].tolist() == [3, 2, 1, 3, 2, 1]


def test_cardinality_is_true_and_every_token_is_seen_once_when_shuffled():
    lines = [" ".join(f"w{i % 13}" for i in range(k, k + 20)) for k in range(30)]
    _, plain, ds = all_windows(lines, order=4)
    _, mixed, sds = all_windows(lines, order=4, shuffle=True, shuffle_buffer=50, seed=3)
    assert ds.cardinality().numpy() == sds.cardinality().numpy() == int(np.ceil(len(plain) / 4))
    assert sorted(plain) == sorted(mixed)
    assert plain != mixed


def test_shuffle_order_is_a_function_of_seed_and_epoch():
    lines = [" ".join(f"w{i}" for i in range(k, k + 30)) for k in range(20)]
    split = corpus.Split("s", lines=tuple(lines))
    vocab = vocab_of(lines)
    epoch = tf.Variable(0, dtype=tf.int64)
    ds = data.window_dataset(split, vocab, 3, 8, 620, shuffle=True, shuffle_buffer=100, seed=1, epoch=epoch)

    def order():
        return np.concatenate([t for _, t in ds.as_numpy_iterator()]).tolist()

    first = order()
    epoch.assign(1)
    second = order()
    epoch.assign(0)
    assert order() == first
    assert second != first


def test_split_window_keeps_the_texts_order():
    ctx, tgt = windows.split_window(tf.constant([[1, 2, 3, 4]], tf.int64))
    assert ctx.numpy().tolist() == [[1, 2, 3]] and tgt.numpy().tolist() == [4]


@pytest.mark.parametrize("tokens,batch,expected", [(10, 4, 3), (8, 4, 2), (1, 256, 1)])
def test_num_batches(tokens, batch, expected):
    assert windows.num_batches(tokens, batch) == expected


def test_autotuning_is_off_so_iterators_close_at_once():
    """Autotuning's model thread made each iterator's destruction wait ~8 s (benchmarks/throughput.py)."""
    _, _, ds = all_windows(["a b c"], order=2)
    _, _, sds = all_windows(["a b c"], order=2, shuffle=True, epoch=tf.Variable(0, dtype=tf.int64))
    assert ds.options().autotune.enabled is False
    assert sds.options().autotune.enabled is False


def test_a_files_byte_order_mark_is_not_part_of_its_first_word(tmp_path):
    """Python's reading (vocabulary, counts, n-grams) and tf.data's agree: both drop a leading U+FEFF per file."""
    paths = []
    for name in ("a.txt", "b.txt"):
        path = tmp_path / name
        path.write_bytes("\ufeffthe cat sat\nthe dog \ufeffsat\n".encode())
        paths.append(str(path))
    split = corpus.Split("s", files=tuple(paths))
    assert list(split.iter_lines()) == ["the cat sat\n", "the dog \ufeffsat\n"] * 2  # only a file's first character
    vocab = vocabulary.build(split, 1)
    assert "the" in vocab.words and "\ufeffthe" not in vocab.words
    ds = data.window_dataset(split, vocab, 2, 100, 16)
    targets = [vocab.words[i] for _, t in ds.as_numpy_iterator() for i in t]
    assert targets == ["the", "cat", "sat", "</s>", "the", "dog", "\ufeffsat", "</s>"] * 2


def reference_windows(lines, vocab, order):
    """Each non-blank line's windows, in order, written out in Python: (context oldest first, target)."""
    pairs = []
    for line in lines:
        tokens = corpus.tokenize(line)
        if not tokens:
            continue
        ids = [vocab.bos_id] * (order - 1) + vocab.ids(tokens) + [vocab.eos_id]
        pairs += [(tuple(ids[i : i + order - 1]), ids[i + order - 1]) for i in range(len(tokens) + 1)]
    return pairs


@pytest.mark.parametrize("filter_batch,window_batch", [(7, 3), (64, 32), (1, 1)])
def test_lines_are_windowed_in_batches_exactly_as_one_by_one(monkeypatch, filter_batch, window_batch):
    """Lines are filtered and windowed a batch at a time; batch edges, blank lines and lines of one word
    must not move, drop or join a window."""
    monkeypatch.setattr(windows, "_FILTER_BATCH", filter_batch)
    monkeypatch.setattr(windows, "_WINDOW_BATCH", window_batch)
    lines = [" ".join(f"w{(k * 7 + i) % 23}" for i in range(k % 9)) + ("  \t" if k % 5 == 0 else "") for k in range(80)]
    lines[30:30] = ["\v\f\r", "\u00a0", " \x0b"]  # ASCII whitespace only: blank; a no-break space is a word
    vocab = vocab_of(lines)
    tokens = len(reference_windows(lines, vocab, 4))
    split = corpus.Split("s", lines=tuple(lines))
    ds = data.window_dataset(split, vocab, 4, 16, tokens)
    pairs = [(tuple(c), t) for ctx, tgt in ds.as_numpy_iterator() for c, t in zip(ctx, tgt)]
    assert pairs == reference_windows(lines, vocab, 4)
    assert len(pairs) == tokens and any(not corpus.tokenize(line) for line in lines)
