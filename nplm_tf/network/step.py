"""One training step, for every loop that trains: Keras `fit` (`NPLMModel.train_step`), the multi-worker
loop (`distributed.multi_worker`) and local SGD (`distributed.local_sgd`).

Replicas each compute their share of the global batch's loss and their gradients are summed, so each
contributes (its batch's mean −ln P + R(θ)) / replicas: the global mean (replica batches are equal,
`training.strategies.check_batch_split`) plus R(θ) once. A local-SGD worker is one replica of its own.
"""

from __future__ import annotations

import tensorflow as tf


def replica_loss(nll, regularization, replicas):
    """This replica's share of the loss: (mean of its −ln P (batch,) + R(θ)) / replicas."""
    return (tf.reduce_mean(nll) + regularization) / replicas


def summed_loss(nll, regularization):
    """A replica's batch's loss summed over its examples, each −ln P + R(θ): what Keras's `fit` averages as its
    loss (the loops that call the step themselves report the same)."""
    return tf.reduce_sum(nll) + regularization * tf.cast(tf.shape(nll)[0], nll.dtype)


def train_step(model, optimizer, objective, context, target, replicas, step=None, worker=0):
    """One step of `objective` (`network.objectives`) on a replica's batch: the gradients of `replica_loss`,
    applied by `optimizer`. `step` and `worker` key a sampled objective's noise (default: the optimizer's
    step, worker 0). Returns (−ln P per example, R(θ))."""
    with tf.GradientTape() as tape:
        nll, regularization = objective.losses(model, context, target, step=step, worker=worker)
        loss = replica_loss(nll, regularization, replicas)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(gradients, model.trainable_variables)
    return nll, regularization
