"""Equation (1)'s first layers, written once for both engines (`nplm_tf.engines`): x from the word features, and
the output layer's inputs tanh(d + H·x) and x. The Keras layer (`layer.NPLMLayer`, through `equation`), the
serving graph (`serving.network`) and the NumPy network (`inference.network`) all compute them here. No
TensorFlow is imported: the NumPy path reads this module too."""

from __future__ import annotations

from nplm_tf import engines


def word_features(C, context, engine=engines.TENSORFLOW):
    """x = (C(w_{t-1}), ..., C(w_{t-n+1})), (batch, (n-1)m), of contexts (batch, n-1) oldest first (the text's
    order, which every part of the project uses): the newest word's features first, as in the paper."""
    words, features = int(context.shape[1]), int(C.shape[1])
    return engine.reshape(engine.gather(C, context[:, ::-1]), [-1, words * features])


def output_layer_inputs(x, H, d, direct: bool, dropout=None, engine=engines.TENSORFLOW) -> list:
    """The output layer's inputs: [tanh(d + H·x)] (after `dropout`, a function, when given) where H exists,
    and x itself where W does, each (batch, ·), in x's dtype."""
    parts = []
    if H is not None:
        a = engine.tanh(engine.matmul(x, H) + d)  # (batch, h)
        parts.append(dropout(a) if dropout is not None else a)
    return parts + [x] if direct else parts


def windows(flat_ids, lengths, context_size: int, bos_id: int, eos_id: int, engine=engines.TENSORFLOW):
    """Every predicted token of some lines (each word, then `</s>`), from their ids laid end to end (`flat_ids`,
    int64) and each line's length: contexts (T, c) oldest first, `<s>`-padded, and targets (T,), T = Σ (L + 1).

    Index arithmetic and gathers only, the same in both engines: the SavedModel's `score` and the NumPy
    network's scoring window text this way (training's tf.data pipeline windows its batches of lines with
    tensorflow-text's sliding window, `pipelines.windows`, for speed)."""
    lengths = engine.int64(lengths)
    predicted = lengths + 1
    line = engine.repeat(engine.arange(engine.size(lengths)), predicted)  # (T,) each token's line
    first = engine.cumsum(predicted) - predicted  # each line's first predicted token
    position = engine.arange(engine.sum(predicted)) - engine.gather(first, line)  # (T,) within its line
    offset = position[:, None] + (engine.arange(context_size + 1) - context_size)[None, :]  # (T, c + 1)
    length = engine.gather(lengths, line)[:, None]
    inside = (offset >= 0) & (offset < length)
    start = engine.gather(engine.cumsum(lengths) - lengths, line)[:, None]  # the line's first id in flat_ids
    ids = engine.concat([engine.int64(flat_ids), engine.int64([bos_id])], axis=0)  # one more: outside reads it
    read = engine.gather(ids, engine.where(inside, start + offset, engine.size(ids) - 1))
    window = engine.where(inside, read, engine.where(offset == length, eos_id, bos_id))
    return window[:, :context_size], window[:, context_size]
