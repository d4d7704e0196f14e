"""The full softmax over the vocabulary: equation (1)'s P(w | C) = exp(y_w) / Σ_v exp(y_v), the paper's head.

The sampled losses (sampled softmax, NCE: `network.objectives.Sampled`) train this head too; it is always
scored exactly.
"""

from __future__ import annotations

import numpy as np

from nplm_tf import engines
from nplm_tf.network.heads import base


class FullSoftmax(base.Head):
    name = "softmax"
    nplm_refusal = None

    def output_size(self) -> int:
        return self.vocab_size

    def initial_bias(self, counts) -> np.ndarray:
        return base.log_frequencies(base.unigram(counts)).astype(np.float32)

    def nll(self, targets, logits):
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        return ops.token_nll(targets, logits)

    def training_losses(self, layer, context, target):
        """The loss with b added inside the softmax's gradient pass (`ops.softmax_training_losses`), and R(θ)."""
        # deferred: TensorFlow loads when this runs, not with the module
        from nplm_tf.network.heads import ops

        return ops.softmax_training_losses(layer, context, target, self_normalize=self.self_normalize)

    def log_prob(self, outputs, context, target, engine=engines.TENSORFLOW):
        logits = base.as_outputs(outputs, engine).logits()
        return engine.to64(engine.log_softmax_at(logits, target))

    def distribution(self, outputs, context, engine=engines.TENSORFLOW):
        return engine.to64(engine.softmax(base.as_outputs(outputs, engine).logits()))

    def top_k(self, outputs, context, k, engine=engines.TENSORFLOW):
        logits = base.as_outputs(outputs, engine).logits()  # softmax is monotone: rank the logits, normalize the k
        values, ids = engine.top_k(logits, k)
        return engine.to64(engine.exp(values - engine.logsumexp(logits))), ids

    def np_unnormalized(self, outputs):
        outputs = base.as_outputs(outputs, engines.NUMPY)
        y = outputs.logits()
        return y, engines.NUMPY.log_normalizer(y)
