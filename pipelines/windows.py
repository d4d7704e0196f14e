"""The streaming tf.data pipeline: lines -> ids -> <s> padding -> n-gram windows.

Each line becomes `<s>`*(n-1) + ids + `</s>`; a sliding window of width n over
it (tensorflow-text's, in `nplm_tf.network.forward.windows`, which the caller
passes in) gives one (context, target) pair per predicted token, so windows
never cross a line. The context is in the text's order, oldest word first, as everywhere
in the project (the n-grams, the network, the serving graph); the network reads
it into the paper's x = (C(w_{t-1}), ..., C(w_{t-n+1})) itself. Nothing here holds the corpus's
windows in Python memory; the shuffle buffer bounds what tf.data keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from pipelines import corpus as corpus_lib
from pipelines import vocabulary as vocab_lib

AUTOTUNE = tf.data.AUTOTUNE
_LINE_SHUFFLE_BUFFER = 10_000
# Lines are filtered and windowed in batches: per line, tf.data's fixed cost (a function call, a few small
# ops) was most of the pipeline's CPU time on short lines (docs/design.md, "The input pipeline").
_FILTER_BATCH = 64
_WINDOW_BATCH = 32
# The functions tf.data traces are left as written: their control flow is Python's (on the split's and the
# flags' values, never on tensors), and AutoGraph's conversion of them (and of tensorflow-text's
# `sliding_window` inside) took a noticeable part of every process that builds a dataset.
_as_written = tf.autograph.experimental.do_not_convert


def lines_dataset(split: corpus_lib.Split) -> tf.data.Dataset:
    """The split's lines as a dataset of scalar strings, streamed from disk for files."""
    if split.lines is not None:
        return tf.data.Dataset.from_tensor_slices(tf.constant(list(split.lines), tf.string))
    return tf.data.Dataset.from_tensor_slices(list(split.files)).flat_map(_as_written(_file_lines))


def _file_lines(path: tf.Tensor) -> tf.data.Dataset:
    """One file's lines, the first without its byte-order mark, as `corpus_lib.drop_byte_order_mark` reads it."""
    lines = tf.data.TextLineDataset(path)
    first = lines.take(1).map(
        _as_written(lambda line: tf.strings.regex_replace(line, "^" + corpus_lib.BYTE_ORDER_MARK, ""))
    )
    return first.concatenate(lines.skip(1))


# How lines of ids become windows: (flat ids int64, each line's length, n-1, <s> id, </s> id) -> (T, n) windows,
# each predicted token's context, oldest first, then the token (`nplm_tf.network.forward.windows`, which the
# model's scoring uses too, passed in by the caller: this package imports nothing from nplm_tf).
Windowing = Callable[[tf.Tensor, tf.Tensor, int, int, int], tf.Tensor]


def lines_windows(
    lines: tf.Tensor, table: tf.lookup.StaticHashTable, order: int, bos_id: int, eos_id: int, windowing: Windowing
) -> tf.Tensor:
    """Lines (B,) to their windows in order, (Σ (tokens + 1), n): n-1 context ids, then the target id. One call
    windows a batch of lines, so tf.data's per-element cost is paid per batch, not per line."""
    tokens = tf.strings.split(lines)  # (B, None)
    return windowing(table.lookup(tokens.flat_values), tokens.row_lengths(), order - 1, bos_id, eos_id)


def _nonblank(lines: tf.Tensor) -> tf.Tensor:
    """The lines (B,) that hold at least one token."""
    return tf.boolean_mask(lines, tf.logical_not(tf.strings.regex_full_match(lines, corpus_lib.WHITESPACE + "*")))


def split_window(windows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(batch, n) windows to contexts (batch, n-1), oldest first, and targets (batch,)."""
    return tf.cast(windows[:, :-1], tf.int32), tf.cast(windows[:, -1], tf.int32)


# tf.data's autotuning runs a background model thread per iterator, and
# destroying the iterator waits for that thread's next wake-up: seconds of idle
# CPU at the end of many `fit`/`evaluate` calls (a new iterator every epoch and
# every scoring pass). With autotuning off, AUTOTUNE parallelism stays at the
# fixed value tf.data starts from and the stall is gone; the pipeline still runs
# far ahead of training (benchmarks/pipeline.py).
_OPTIONS = tf.data.Options()
_OPTIONS.autotune.enabled = False


def num_batches(tokens: int, batch_size: int) -> int:
    return math.ceil(tokens / batch_size)


def window_dataset(
    split: corpus_lib.Split,
    vocab: vocab_lib.Vocabulary,
    order: int,
    batch_size: int,
    tokens: int,
    *,
    windowing: Windowing,
    shuffle: bool = False,
    shuffle_buffer: int = 100_000,
    seed: int = 0,
    epoch: tf.Variable | int | None = None,
    table: tf.lookup.StaticHashTable | None = None,
) -> tf.data.Dataset:
    """Batches of (context, target) over every predicted token of `split`.

    Args:
      tokens: predicted tokens in the split (tokens + one `</s>` per line), from
        one counting pass; it fixes the cardinality so Keras counts steps right.
      windowing: how a batch of lines' ids becomes windows (`Windowing`).
      shuffle: mix lines, then permute windows within blocks of `shuffle_buffer`
        consecutive windows (memory is bounded by the block, not the corpus).
      seed, epoch: the shuffle order is a pure function of (seed, epoch value
        when an iterator starts), so a resumed run sees the same batches as an
        uninterrupted one. `epoch` is a variable read when each iterator
        starts (Keras `fit`), or a fixed epoch number.
    """
    table = table if table is not None else vocab.lookup_table()

    def build(epoch_value: tf.Tensor) -> tf.data.Dataset:
        lines = lines_dataset(split).batch(_FILTER_BATCH).map(_as_written(_nonblank)).unbatch()
        if shuffle:
            lines = lines.shuffle(_LINE_SHUFFLE_BUFFER, seed=seed * 7919 + epoch_value)

        # Each element is a batch of lines' windows; rebatch slices and joins
        # them as tensors, never as single windows, which keeps tf.data's
        # per-element cost off the hot path. The windows are split into
        # (context, target) before the last rebatch, once per block rather
        # than once per training batch.
        def windowed(batch):
            found = lines_windows(batch, table, order, vocab.bos_id, vocab.eos_id, windowing)
            return found if shuffle else split_window(found)

        windows = lines.batch(_WINDOW_BATCH).map(_as_written(windowed), num_parallel_calls=AUTOTUNE, deterministic=True)
        if not shuffle:
            return windows.rebatch(batch_size)
        blocks = windows.rebatch(shuffle_buffer).enumerate()

        def mix(index, block):  # a uniform permutation of each block of windows
            key = tf.stack([tf.cast(seed, tf.int64), epoch_value * 1_000_003 + index])
            return split_window(tf.random.experimental.stateless_shuffle(block, seed=key))

        return blocks.map(_as_written(mix), num_parallel_calls=AUTOTUNE, deterministic=True).rebatch(batch_size)

    if shuffle and isinstance(epoch, tf.Variable):
        windows = tf.data.Dataset.from_tensors(0).flat_map(_as_written(lambda _: build(epoch.read_value())))
    else:
        windows = build(tf.constant(epoch or 0, tf.int64))
    ds = windows.apply(tf.data.experimental.assert_cardinality(num_batches(tokens, batch_size)))
    return ds.prefetch(AUTOTUNE).with_options(_OPTIONS)
