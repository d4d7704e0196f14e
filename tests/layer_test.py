import keras
import numpy as np
import pytest
import tensorflow as tf

from nplm_tf.network.layer import NPLMLayer

V, N1, M, H = 7, 2, 3, 4


def make_layer(direct, weight_decay=0.0, dtype="float32", **kwargs):
    layer = NPLMLayer(
        vocab_size=V,
        context_size=N1,
        feature_dim=M,
        hidden_dim=H,
        direct=direct,
        weight_decay=weight_decay,
        dtype=dtype,
        **kwargs,
    )
    layer.build((None, N1))
    rng = np.random.default_rng(0)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    return layer


def numpy_eq1(layer, context):
    C, H_, d, U, b = (np.asarray(layer.weights[i].numpy(), np.float64) for i in range(5))
    x = np.concatenate([C[context[:, -1 - j]] for j in range(N1)], axis=1)  # (batch, (n-1)m): w_{t-1} first
    y = b + np.tanh(d + x @ H_) @ U
    if layer.W is not None:
        y = y + x @ np.asarray(layer.W.numpy(), np.float64)
    return y


@pytest.mark.parametrize("direct", [False, True])
def test_matches_numpy_equation_1(direct):
    layer = make_layer(direct)
    context = np.array([[0, 1], [6, 7], [3, 3]], np.int32)  # 7 is <s>
    got = layer(context).numpy()
    np.testing.assert_allclose(got, numpy_eq1(layer, context), rtol=1e-5, atol=1e-5)
    assert got.dtype == np.float32
    assert len(layer.weights) == (6 if direct else 5)


def test_bfloat16_policy_is_close_and_returns_float32():
    exact = make_layer(False)
    fast = make_layer(False, dtype="mixed_bfloat16")
    context = np.array([[1, 2], [4, 5]], np.int32)
    got = fast(context)
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), exact(context).numpy(), rtol=0.05, atol=0.15)


def test_get_config_round_trip():
    layer = make_layer(True, weight_decay=0.01)
    clone = NPLMLayer.from_config(layer.get_config())
    for key in ("vocab_size", "context_size", "feature_dim", "hidden_dim", "direct", "weight_decay"):
        assert getattr(clone, key) == getattr(layer, key)


@pytest.mark.parametrize(
    "name,value", [("vocab_size", 0), ("context_size", -1), ("feature_dim", 0), ("hidden_dim", 2.5)]
)
def test_rejects_bad_sizes_naming_the_argument(name, value):
    args = dict(vocab_size=V, context_size=N1, feature_dim=M, hidden_dim=H)
    args[name] = value
    with pytest.raises(ValueError, match=name):
        NPLMLayer(**args)


def test_saved_and_reloaded_model_gives_identical_logits(tmp_path):
    inputs = keras.Input((N1,), dtype="int32")
    model = keras.Model(inputs, make_layer(True)(inputs))
    path = str(tmp_path / "m.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    context = np.array([[0, 1], [6, 7]], np.int32)
    np.testing.assert_array_equal(model.predict(context, verbose=0), reloaded.predict(context, verbose=0))


def test_gradient_of_C_is_sparse_and_touches_only_window_rows():
    layer = make_layer(False, weight_decay=0.1)
    context = tf.constant([[1, 2], [2, 5]], tf.int32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(context)) + tf.add_n(layer.losses)
    grad_c = tape.gradient(loss, layer.C.value)
    assert isinstance(grad_c, tf.IndexedSlices)
    assert set(np.unique(grad_c.indices.numpy())) == {1, 2, 5}


@pytest.mark.parametrize("training", [False, True])  # training: U's and W's decay gradient is fused with the cast's
def test_weight_decay_touches_no_bias(training):
    layer = make_layer(True, weight_decay=0.5)
    layer(np.array([[1, 2]], np.int32))
    with tf.GradientTape() as tape:
        layer(np.array([[1, 2]], np.int32), training=training)
        penalty = tf.add_n(layer.losses)
    grads = dict(zip([w.name for w in layer.weights], tape.gradient(penalty, [w.value for w in layer.weights])))
    assert grads["b"] is None and grads["d"] is None
    for name in ("H", "U", "W"):  # d/dθ λ‖θ‖² = 2λθ
        np.testing.assert_allclose(
            tf.convert_to_tensor(grads[name]).numpy(), 2 * 0.5 * getattr(layer, name).numpy(), rtol=1e-6
        )
    # Only the two C rows in the window are decayed.
    assert set(np.unique(grads["C"].indices.numpy())) == {1, 2}


def test_dropout_only_in_training_with_masks_keyed_by_step():
    layer = NPLMLayer(vocab_size=V, context_size=N1, feature_dim=M, hidden_dim=H, dropout=0.5, seed=3)
    context = np.array([[1, 2], [3, 4]], np.int32)
    inference = layer(context).numpy()
    np.testing.assert_array_equal(inference, layer(context, training=False).numpy())
    first = layer(context, training=True).numpy()
    second = layer(context, training=True).numpy()
    assert int(layer.step.numpy()) == 2
    assert not np.allclose(first, inference) and not np.allclose(first, second)
    layer.step.assign(1)  # the same step draws the same masks
    np.testing.assert_array_equal(layer(context, training=True).numpy(), second)


def test_dropout_rate_is_checked():
    with pytest.raises(ValueError, match="dropout"):
        NPLMLayer(vocab_size=V, context_size=N1, feature_dim=M, hidden_dim=H, dropout=1.0)


def test_no_hidden_layer_is_the_linear_model_with_direct_connections():
    layer = NPLMLayer(vocab_size=V, context_size=N1, feature_dim=M, hidden_dim=0, direct=True)
    layer.build((None, N1))
    assert [w.name for w in layer.weights] == ["C", "b", "W"]
    rng = np.random.default_rng(1)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    context = np.array([[0, 1], [6, 7]], np.int32)
    C, W, b = (np.asarray(w.numpy(), np.float64) for w in (layer.C, layer.W, layer.b))
    x = np.concatenate([C[context[:, -1 - j]] for j in range(N1)], axis=1)  # contexts oldest first
    np.testing.assert_allclose(layer(context).numpy(), b + x @ W, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="hidden_dim"):
        NPLMLayer(vocab_size=V, context_size=N1, feature_dim=M, hidden_dim=0, direct=False)


def test_bfloat16_policy_keeps_bias_and_penalty_in_float32():
    # b = 1 + 2^-12 is exact in float32 and rounds to 1 in bfloat16; U = 0 makes the logits exactly b.
    layer = make_layer(False, weight_decay=0.5, dtype="mixed_bfloat16")
    layer.U.assign(np.zeros(layer.U.shape, np.float32))
    layer.b.assign(np.full(layer.b.shape, 1 + 2**-12, np.float32))
    context = tf.constant([[1, 2], [3, 7]], tf.int32)
    with tf.GradientTape() as tape:
        logits = layer(context, training=True)
        total = tf.reduce_sum(logits * tf.range(1, V + 1, dtype=tf.float32))
    np.testing.assert_array_equal(logits.numpy(), np.full((2, V), 1 + 2**-12, np.float32))
    np.testing.assert_array_equal(layer(context).numpy(), logits.numpy())  # inference: the same in core ops
    # The bias gradient sums over the batch (2 rows), in float32.
    np.testing.assert_allclose(tape.gradient(total, layer.b.value).numpy(), 2 * np.arange(1, V + 1), rtol=1e-6)
    # R(θ) = λ(‖H‖² + ‖U‖²) + λ·mean Σ‖C(w)‖², computed in float32 (bfloat16 would be off by ~1e-3).
    C = layer.C.numpy().astype(np.float64)
    expected = 0.5 * (
        (layer.H.numpy().astype(np.float64) ** 2).sum() + np.mean([(C[[1, 2]] ** 2).sum(), (C[[3, 7]] ** 2).sum()])
    )
    np.testing.assert_allclose(float(tf.add_n(layer.losses)), expected, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_training_gradients_equal_the_core_op_graph(dtype):
    # In training the layer adds b, casts U and W and takes their Σw² through
    # custom gradients; inference builds the same function from core ops. Both
    # must give the same gradient of logits and R(θ) for every weight.
    layer = make_layer(True, weight_decay=0.25, dtype=dtype)
    context = tf.constant([[1, 2], [3, 7], [0, 0]], tf.int32)
    upstream = np.random.default_rng(1).normal(size=(3, V)).astype(np.float32)

    def gradients(training):
        with tf.GradientTape() as tape:
            logits = layer(context, training=training)
            total = tf.reduce_sum(logits * upstream) + tf.add_n(layer.losses)
        grads = tape.gradient(total, [w.value for w in layer.weights])
        return [tf.convert_to_tensor(g).numpy() for g in grads]

    for w, fused, core in zip(layer.weights, gradients(True), gradients(False)):
        np.testing.assert_allclose(fused, core, rtol=1e-5, atol=1e-5, err_msg=w.name)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("rows", [False, True])
@pytest.mark.parametrize("underflow", [False, True])
def test_the_softmax_loss_of_the_terms_equals_the_loss_of_the_logits(dtype, rows, underflow):
    # The softmax heads train on y's terms (`training_output`), the loss forming y = b + Σ part·weight and its
    # gradient itself; loss, R(θ) and every weight's gradient must be those of the logits' loss. b's gradient
    # is the sum of y's in y's dtype, so under bfloat16 it has the weights' precision.
    from nplm_tf.network.heads import ops as head_ops

    layer = make_layer(True, weight_decay=0.25, dtype=dtype, output_rows=rows)
    if underflow:  # P(word 0) underflows float32: the loss's exact path
        layer.b.assign(np.array([0, 0, 0, 0, 0, 0, 120.0], np.float32))
    context = tf.constant([[1, 2], [3, 7], [0, 0], [5, 5]], tf.int32)
    targets = tf.constant([3, 6, 0, 2], tf.int32)

    def run(fused):
        with tf.GradientTape() as tape:
            if fused:
                parts, weights, bias, penalty = layer.training_output(context)
                nll = head_ops.output_softmax_nll(targets, parts, weights, bias, layer.output_rows)
            else:
                nll, penalty = head_ops.token_nll(targets, layer(context, training=True)), tf.add_n(layer.losses)
            total = tf.reduce_mean(nll) * 3.0 + penalty
        grads = tape.gradient(total, [w.value for w in layer.weights])
        return nll.numpy(), float(penalty), [tf.convert_to_tensor(g).numpy() for g in grads]

    nll, penalty, grads = run(True)
    nll_ref, penalty_ref, grads_ref = run(False)
    assert (nll[2] > 100) == underflow  # the underflowing target's −ln P, from the logits
    np.testing.assert_allclose(nll, nll_ref, rtol=1e-6)
    assert penalty == pytest.approx(penalty_ref, rel=1e-6)
    for w, fused, reference in zip(layer.weights, grads, grads_ref):
        rounded = w.name == "b" and dtype == "mixed_bfloat16"
        np.testing.assert_allclose(fused, reference, rtol=2e-2 if rounded else 1e-5, atol=1e-6, err_msg=w.name)


@pytest.mark.parametrize("rows", [False, True])
def test_the_self_normalized_loss_and_its_gradient_are_the_formulas(rows):
    """`output_softmax_nll` with α: −ln P + α·(ln Z)² per example, and the gradient autodiff gives that formula
    (weights, parts and b), for weights stored as columns or as rows."""
    from nplm_tf.network.heads import ops

    rng = np.random.default_rng(4)
    alpha, batch, inputs, outputs = 0.3, 5, 4, 9
    part = tf.constant(rng.normal(size=(batch, inputs)), tf.float32)
    weight = tf.constant(rng.normal(size=(outputs, inputs) if rows else (inputs, outputs)), tf.float32)
    bias = tf.constant(rng.normal(size=outputs), tf.float32)
    targets = tf.constant(rng.integers(0, outputs, size=batch))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([part, weight, bias])
        got = ops.output_softmax_nll(targets, [part], [weight], bias, rows, alpha)
        y = tf.matmul(part, weight, transpose_b=rows) + bias
        log_z = tf.reduce_logsumexp(y, axis=1)
        expected = log_z - tf.gather(y, targets, batch_dims=1) + alpha * tf.square(log_z)
        got_total, expected_total = tf.reduce_sum(got), tf.reduce_sum(expected)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5)
    for variable in (part, weight, bias):
        np.testing.assert_allclose(
            tape.gradient(got_total, variable).numpy(), tape.gradient(expected_total, variable).numpy(), atol=1e-4
        )
