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
    """Every predicted token of some lines (each word, then `</s>`) as a window (T, c + 1), T = Σ (L + 1): its
    `<s>`-padded context, oldest word first, then the token. `flat_ids` (int64) are the lines' ids laid end to
    end, `lengths` each line's count.

    Each line becomes `<s>`·c + ids + `</s>`, the lines laid end to end; a sliding window of width c + 1 over
    that gives the windows, less the c that cross from one line into the next. Training's tf.data pipeline
    (`pipelines.windows`), the SavedModel's `score` and the NumPy network's scoring all window text here."""
    lengths = engine.int64(lengths)
    width, lines, tokens = context_size + 1, engine.size(lengths), engine.sum(lengths)
    line = engine.arange(lines)
    # The k-th id of all (k counting across lines) of line r goes width·r + c places on: each line before it
    # added c `<s>` and one `</s>`; its `</s>` follows its last id.
    at = engine.arange(tokens) + width * engine.repeat(line, lengths) + context_size
    ends = engine.cumsum(lengths) + width * line + context_size
    padded = engine.scatter_into(
        tokens + width * lines,
        bos_id,
        engine.concat([at, ends], axis=0),
        engine.concat([engine.int64(flat_ids), engine.ones_like(ends) * eos_id], axis=0),
    )
    predicted = lengths + 1  # a line's windows start c places later for each line before it
    keep = engine.arange(tokens + lines) + context_size * engine.repeat(line, predicted)
    return engine.gather(engine.sliding_window(padded, width), keep)
