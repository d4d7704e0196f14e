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
