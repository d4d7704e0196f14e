"""The Keras functional model of equation (1) (its loss, -ln P(target | context): `network.objectives`)."""

from __future__ import annotations

import keras
import tensorflow as tf

from nplm_tf.core.config import Config
from nplm_tf.network import heads, objectives
from nplm_tf.network import step as step_lib
from nplm_tf.network.heads.ops import log_softmax_at, token_nll  # noqa: F401  (the softmax's losses)
from nplm_tf.network.layer import NPLMLayer
from nplm_tf.network.optimizers import make_optimizer


@keras.saving.register_keras_serializable(package="nplm_tf")
class NPLMModel(keras.Model):
    """The functional model of equation (1), trained by its `objective` (`network.objectives`).

    Every objective trains with the project's one step (`network.step`), which the multi-worker loop and local
    SGD take too. Without an objective (a model loaded for scoring) it is an ordinary functional model.

    Its `head` (`network.heads`) turns the outputs into P(w | C) over the whole vocabulary; a short list's
    n-gram tail comes with it when the model scores (`network.loading`). The head holds no weight of the
    model: the model directory keeps a tail n-gram in its own files.
    """

    objective = None
    head = None

    def train_step(self, data):
        if self.objective is None:
            return super().train_step(data)
        context, target = data
        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        nll, regularization = step_lib.train_step(self, self.optimizer, self.objective, context, target, replicas)
        self._loss_tracker.update_state(tf.reduce_mean(nll) + regularization, sample_weight=tf.shape(target)[0])
        return {"loss": self._loss_tracker.result()}


def build_model(config: Config, head: heads.Head) -> keras.Model:
    """context ids (batch, n-1) -> logits (batch, outputs), the outputs of `head` over its |V| words (the run's
    one head, `heads.make`)."""
    vocab_size = head.vocab_size
    context = keras.Input(shape=(config.context_size,), dtype="int32", name="context")
    logits = NPLMLayer(
        vocab_size=vocab_size,
        context_size=config.context_size,
        feature_dim=config.feature_dim,
        hidden_dim=config.hidden_dim,
        direct=config.direct,
        weight_decay=config.weight_decay,
        dropout=config.dropout,
        seed=config.seed,
        output_size=head.output_size(),
        output_rows=head.stores_rows,
        dtype=config.precision,
        name="nplm",
    )(context)
    model = NPLMModel(context, logits, name="nplm")
    model.head = head
    return model


def compile_model(model: keras.Model, config: Config, steps_per_execution: int = 1, objective=None) -> keras.Model:
    """Compiles for training `objective` (default: the model's head's own loss)."""
    model.objective = objective or objectives.HeadObjective(model.head)
    # No compiled metrics: a training-time metric would compute the softmax a
    # second time each step; validation perplexity is computed exactly per epoch.
    model.compile(
        optimizer=make_optimizer(config, model.head),
        loss=model.objective.keras_loss(),
        steps_per_execution=steps_per_execution,
        jit_compile=config.jit_compile,
    )
    return model
