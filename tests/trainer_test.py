import json
import os
import subprocess
import sys
from itertools import product

import keras
import numpy as np
import pytest

from nplm_tf.core.config import ConfigError
from nplm_tf.core.run_dir import RunDir
from nplm_tf.training import backup, trainer
from pipelines import corpus as corpus_lib
from tests import helpers


def files_corpus(tmp_path):
    paths = helpers.tiny_corpus_files(tmp_path)
    return corpus_lib.files_corpus(paths["train"], paths["valid"], paths["test"])


class Interrupt(keras.callbacks.Callback):
    """A Ctrl-C at every call that begins at or after (epoch, batch): raised, as Ctrl-C would; or, `dropped`,
    sent from inside a `__del__`, where Python drops its KeyboardInterrupt (`helpers.DropsAnInterrupt`).
    `batches` lists the calls begun."""

    def __init__(self, epoch, batch, dropped=False):
        super().__init__()
        self.at, self.dropped, self.epoch, self.batches = (epoch, batch), dropped, None, []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.batches.append((self.epoch, batch))
        if (self.epoch, batch) >= self.at:
            if self.dropped:
                helpers.DropsAnInterrupt()
            else:
                raise KeyboardInterrupt


def test_small_run_writes_metrics_and_learns(tmp_path):
    config = helpers.tiny_config(epochs=3)
    metrics = trainer.train_and_evaluate(config, str(tmp_path / "m"), files_corpus(tmp_path), verbose=0, export=False)
    with open(tmp_path / "m" / "metrics.json") as f:
        assert json.load(f) == json.loads(json.dumps(metrics))
    assert metrics["config"] == config.to_dict()
    assert set(metrics["tokens"]) == {"train", "valid", "test"}
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3]
    for key in ("train_loss", "valid_perplexity", "seconds", "tokens_per_second"):
        assert all(np.isfinite(e[key]) for e in metrics["epochs"]), key
    # A small grammar: far better than uniform over the vocabulary.
    assert metrics["test_perplexity"] < 0.5 * metrics["vocab_size"]
    assert os.path.isfile(tmp_path / "m" / "model.keras")


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"dropout": 0.3},
        {"loss": "nce", "num_sampled": 6},  # the noise is drawn again after the resume, as the first time
        {"average": 0.9},  # the weights' average resumes from the backup's optimizer state
    ],
    ids=["plain", "dropout", "sampled", "average"],
)
def test_resume_after_interruption_matches_uninterrupted_run(tmp_path, changes):
    corpus = files_corpus(tmp_path)
    config = helpers.tiny_config(epochs=4, optimizer="adam", learning_rate=0.01, lr_decay=0.01, **changes)
    straight = trainer.train_and_evaluate(config, str(tmp_path / "a"), corpus, verbose=0, export=False)
    with pytest.raises(KeyboardInterrupt):  # mid-epoch 3
        trainer.train_and_evaluate(
            config, str(tmp_path / "b"), corpus, verbose=0, extra_callbacks=[Interrupt(epoch=2, batch=3)], export=False
        )
    assert len(RunDir(str(tmp_path / "b")).read_history()) == 2
    assert not os.path.exists(tmp_path / "b" / "metrics.json")
    resumed = trainer.train_and_evaluate(config, str(tmp_path / "b"), corpus, verbose=0, export=False)
    for key in ("valid_perplexity", "test_perplexity"):
        assert resumed[key] == pytest.approx(straight[key], rel=1e-4), key
    assert [e["valid_perplexity"] for e in resumed["epochs"]] == pytest.approx(
        [e["valid_perplexity"] for e in straight["epochs"]], rel=1e-4
    )


def test_an_averaged_run_validates_keeps_and_scores_the_average_and_trains_on_its_own_weights(tmp_path):
    import tensorflow as tf

    from nplm_tf.network import loading, scoring
    from nplm_tf.training.data import eval_dataset

    corpus = files_corpus(tmp_path)
    config = helpers.tiny_config(epochs=2, average=0.8, patience=5)
    metrics = trainer.train_and_evaluate(config, str(tmp_path / "m"), corpus, verbose=0, export=False)
    run = RunDir(str(tmp_path / "m"))
    _, vocab, model = loading.load_trained(str(tmp_path / "m"))  # the best weights: an average
    valid = eval_dataset(corpus["valid"], vocab, config, model.head)
    history = run.read_history()
    assert scoring.score(model, valid, vocab.unk_id).perplexity == pytest.approx(metrics["valid_perplexity"])
    assert metrics["valid_perplexity"] == pytest.approx(min(h["valid_perplexity"] for h in history.values()))
    # The last backup holds the raw weights and, with the optimizer's state, their average: the average is
    # what epoch 2 recorded; the raw weights, from which training would go on, score otherwise.
    backed_up = trainer.build_compiled_model(config, vocab.counts, tf.distribute.get_strategy(), model.head)
    assert backup.restore_backup(backed_up, run) == 2
    raw = scoring.score(backed_up, valid, vocab.unk_id).perplexity
    backed_up.optimizer.finalize_variable_values(backed_up.trainable_variables)
    averaged = scoring.score(backed_up, valid, vocab.unk_id).perplexity
    assert averaged == pytest.approx(history[1]["valid_perplexity"], rel=1e-6)
    assert abs(raw - averaged) > 1e-3 * averaged


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the drop is the test
def test_training_stops_at_the_step_after_an_interrupt_python_dropped(tmp_path):
    config = helpers.tiny_config(epochs=4)
    dropper = Interrupt(epoch=1, batch=0, dropped=True)
    with helpers.remembering_interrupts(), pytest.raises(KeyboardInterrupt):
        trainer.train_and_evaluate(
            config, str(tmp_path / "m"), files_corpus(tmp_path), verbose=0, extra_callbacks=[dropper], export=False
        )
    assert dropper.batches[-1] == (1, 0)  # stopped at that call's end: no call after it
    assert len(RunDir(str(tmp_path / "m")).read_history()) == 1
    assert not os.path.exists(tmp_path / "m" / "metrics.json")


def test_resume_survives_a_truncated_backup(tmp_path):
    """A damaged newest backup falls back to the generation before it (and a half-written save is ignored)."""
    corpus = files_corpus(tmp_path)
    config = helpers.tiny_config(epochs=4)
    straight = trainer.train_and_evaluate(config, str(tmp_path / "a"), corpus, verbose=0, export=False)
    with pytest.raises(KeyboardInterrupt):
        trainer.train_and_evaluate(
            config, str(tmp_path / "b"), corpus, verbose=0, extra_callbacks=[Interrupt(epoch=3, batch=0)], export=False
        )
    backup = tmp_path / "b" / "backup"
    generations = json.loads((backup / "state.json").read_text())["generations"]
    assert [g["epoch"] for g in generations] == [3, 2]
    assert sorted(f for f in os.listdir(backup) if f.startswith("epoch-")) == [g["weights"] for g in generations[::-1]]
    latest = backup / generations[0]["weights"]
    latest.write_bytes(latest.read_bytes()[:96])
    (backup / ".tmp-epoch-0004.weights.h5").write_bytes(b"half")  # what an interrupted save leaves: never read
    resumed = trainer.train_and_evaluate(config, str(tmp_path / "b"), corpus, verbose=0, export=False)
    assert resumed["test_perplexity"] == pytest.approx(straight["test_perplexity"], rel=1e-4)


def test_finished_run_is_not_trained_again(tmp_path):
    corpus = files_corpus(tmp_path)
    config = helpers.tiny_config(epochs=1)
    first = trainer.train_and_evaluate(config, str(tmp_path / "m"), corpus, verbose=0, export=False)
    mtime = os.path.getmtime(tmp_path / "m" / "best.weights.h5")
    (tmp_path / "m" / "backup" / ".tmp-epoch-0002.weights.h5").write_bytes(b"half")  # as a kill -9 leaves it
    again = trainer.train_and_evaluate(config, str(tmp_path / "m"), corpus, verbose=0, export=False)
    assert again == json.loads(json.dumps(first))
    assert os.path.getmtime(tmp_path / "m" / "best.weights.h5") == mtime
    assert not (tmp_path / "m" / "backup" / ".tmp-epoch-0002.weights.h5").exists()


def test_more_epochs_continue_a_finished_run(tmp_path):
    corpus = files_corpus(tmp_path)
    trainer.train_and_evaluate(helpers.tiny_config(epochs=1), str(tmp_path / "m"), corpus, verbose=0, export=False)
    first = RunDir(str(tmp_path / "m")).read_history()[0]
    longer = trainer.train_and_evaluate(
        helpers.tiny_config(epochs=3), str(tmp_path / "m"), corpus, verbose=0, export=False
    )
    assert [e["epoch"] for e in longer["epochs"]] == [1, 2, 3]
    assert longer["epochs"][0] == first  # epoch 1 was not trained again


def test_model_dir_of_another_config_or_corpus_is_refused_and_left_intact(tmp_path, monkeypatch):
    corpus = files_corpus(tmp_path)
    metrics = trainer.train_and_evaluate(
        helpers.tiny_config(epochs=1), str(tmp_path / "m"), corpus, verbose=0, export=False
    )
    before = {f: os.path.getmtime(tmp_path / "m" / f) for f in os.listdir(tmp_path / "m")}
    with pytest.raises(ConfigError, match=r"another configuration \(hidden_dim: 16 -> 32\)"):
        trainer.train_and_evaluate(
            helpers.tiny_config(epochs=1, hidden_dim=32), str(tmp_path / "m"), corpus, export=False
        )
    assert {f: os.path.getmtime(tmp_path / "m" / f) for f in os.listdir(tmp_path / "m")} == before
    # Continued on other text, it would keep the first text's vocabulary and best epoch, and corpus.json would
    # name the second: refused too. The same files named another way are the same corpus.
    other = helpers.write_lines(str(tmp_path / "other.txt"), helpers.synthetic_texts(5, 30))
    elsewhere = corpus_lib.files_corpus(other, str(tmp_path / "valid.txt"), str(tmp_path / "test.txt"))
    with pytest.raises(ConfigError) as refused:
        trainer.train_and_evaluate(helpers.tiny_config(epochs=2), str(tmp_path / "m"), elsewhere, export=False)
    assert str(refused.value) == (
        f"{tmp_path / 'm'} holds a model trained on another corpus (train_files: {str(tmp_path / 'train.txt')!r} -> "
        f"{other!r}); use a new --model_dir or the same corpus flags."
    )
    assert {f: os.path.getmtime(tmp_path / "m" / f) for f in os.listdir(tmp_path / "m")} == before
    monkeypatch.chdir(tmp_path)
    same = corpus_lib.files_corpus("./train.txt", "valid.txt", str(tmp_path / "test.txt"))
    assert (
        trainer.train_and_evaluate(helpers.tiny_config(epochs=1), "m", same, export=False) == metrics
    )  # finished: as it was


def test_a_directory_of_another_config_that_finished_no_epoch_is_refused_as_such(tmp_path):
    """Ctrl-C in the first epoch (or a crash) leaves a directory set up with its config: refused for another
    config, and the sentence no longer claims it holds a trained model."""
    corpus, model_dir = files_corpus(tmp_path), str(tmp_path / "m")
    with pytest.raises(KeyboardInterrupt):
        trainer.train_and_evaluate(
            helpers.tiny_config(),
            model_dir,
            corpus,
            verbose=0,
            extra_callbacks=[Interrupt(epoch=0, batch=2)],
            export=False,
        )
    before = {f: os.path.getmtime(os.path.join(model_dir, f)) for f in os.listdir(model_dir)}
    with pytest.raises(ConfigError) as refused:
        trainer.train_and_evaluate(helpers.tiny_config(hidden_dim=32), model_dir, corpus, export=False)
    assert str(refused.value) == (
        f"{model_dir} was set up for a run with another configuration (hidden_dim: 16 -> 32) that finished no "
        "epoch; remove it, use a new --model_dir, or give the same flags."
    )
    assert {f: os.path.getmtime(os.path.join(model_dir, f)) for f in os.listdir(model_dir)} == before


def test_local_sgd_outside_the_multi_worker_loop_is_refused_not_ignored(tmp_path):
    with pytest.raises(ConfigError, match=r"^sync_every=3 needs --strategy=multi_worker \(other strategies"):
        trainer.train_and_evaluate(
            helpers.tiny_config(sync_every=3), str(tmp_path / "m"), files_corpus(tmp_path), export=False
        )
    assert not (tmp_path / "m").exists()


def test_an_average_decay_of_one_is_refused():
    with pytest.raises(ConfigError, match=r"average=1 must be in \[0, 1\)"):
        helpers.tiny_config(average=1)


def test_a_batch_that_does_not_split_over_the_replicas_is_refused_before_the_run_is_set_up(tmp_path):
    """Keras's fit under MirroredStrategy failed on it with an AddN shape error, after the directory was set up
    with this config, so the corrected command was refused as another configuration."""
    import types

    three = types.SimpleNamespace(num_replicas_in_sync=3)  # all the check reads of a MirroredStrategy
    with pytest.raises(ConfigError, match=r"^batch_size=16 does not split evenly over the 3 replicas .* 15 or 18\.$"):
        trainer.train_and_evaluate(
            helpers.tiny_config(batch_size=16), str(tmp_path / "m"), files_corpus(tmp_path), three, export=False
        )
    assert not (tmp_path / "m").exists()


def test_an_exhausted_resource_is_one_sentence_naming_which():
    """TensorFlow raises ResourceExhaustedError for a failed allocation and for a full disk (ENOSPC) alike."""
    import tensorflow as tf

    from pipelines import app

    def sentence(message):
        return app.exhausted_resource_sentence(tf.errors.ResourceExhaustedError(None, None, message))

    assert sentence("OOM when allocating tensor with shape[3,4] and type float on CPU").startswith(
        "out of memory: a tensor of shape [3,4] could not be allocated; use smaller settings"
    )
    full = sentence("runs/m/backup/w.tmp; No space left on device")
    assert (
        full
        == "out of disk space (runs/m/backup/w.tmp; No space left on device); free some space and run the same command again."
    )
    assert sentence("some quota exceeded") == "TensorFlow ran out of a resource: some quota exceeded."
    assert app.exhausted_resource_sentence(tf.errors.InvalidArgumentError(None, None, "OOM")) is None


def test_learning_rate_follows_the_papers_schedule():
    from nplm_tf.network import optimizers

    schedule = optimizers.learning_rate(helpers.tiny_config(learning_rate=0.5, lr_decay=0.25))
    for t in (0, 1, 4, 100):
        assert float(schedule(t)) == pytest.approx(0.5 / (1 + 0.25 * t), rel=1e-6)


def test_fused_adam_matches_keras_adam_on_dense_and_sparse_gradients():
    import tensorflow as tf

    from nplm_tf.network import optimizers

    rng = np.random.default_rng(0)
    shapes = [(7, 5), (5,), (11, 3), (6,)]
    grads = [[rng.normal(size=s).astype("float32") for s in shapes] for _ in range(5)]
    states = []
    for cls, beta_2 in product((keras.optimizers.Adam, optimizers.FusedAdam), (0.999, 0.0)):
        variables = [keras.Variable(np.full(s, 0.3, "float32")) for s in shapes]
        optimizer = cls(learning_rate=keras.optimizers.schedules.InverseTimeDecay(0.01, 1, 0.1), beta_2=beta_2)

        @tf.function
        def step(gradients):
            optimizer.apply_gradients(zip(gradients, variables))

        for dense in grads:
            # An embedding's gradient: rows 3 and 9 seen twice in the batch, row 0 once.
            sparse = tf.IndexedSlices(tf.constant(dense[2][:5]), tf.constant([0, 3, 3, 9, 9]), tf.constant([11, 3]))
            sparse_bias = tf.IndexedSlices(tf.constant(dense[3][:3]), tf.constant([4, 1, 4]), tf.constant([6]))
            step([tf.constant(dense[0]), tf.constant(dense[1]), sparse, sparse_bias])
        states.append([v.numpy() for v in variables + optimizer.variables])
    # β₂ > 0 updates a sparse gradient through TensorFlow's dense kernel; β₂ = 0 cannot (see FusedAdam).
    for keras_state, fused_state in ((states[0], states[2]), (states[1], states[3])):
        for keras_value, fused_value in zip(keras_state, fused_state):
            np.testing.assert_allclose(fused_value, keras_value, rtol=1e-5, atol=1e-7)
    assert np.abs(states[2][2] - 0.3).max() > 0.01 and np.all(states[2][2][[1, 2]] == 0.3)  # untouched rows stay


def test_training_uses_the_fused_adam_update(tmp_path, monkeypatch):
    import tensorflow as tf

    from nplm_tf.network import optimizers

    sparse, dense = [], []
    fused, native = optimizers._sparse_adam_update, tf.raw_ops.ResourceApplyAdam
    monkeypatch.setattr(optimizers, "_sparse_adam_update", lambda *args: sparse.append(1) or fused(*args))
    monkeypatch.setattr(tf.raw_ops, "ResourceApplyAdam", lambda **kwargs: dense.append(1) or native(**kwargs))
    trainer.train_and_evaluate(
        helpers.tiny_config(epochs=1, optimizer="adam"), str(tmp_path / "m"), files_corpus(tmp_path), export=False
    )
    # Traced once per variable: C's sparse gradient, then H, d, U, b (each through TensorFlow's Adam kernel).
    assert len(sparse) >= 1 and len(dense) >= 5


def test_interrupt_during_a_backup_save_keeps_the_last_complete_one(tmp_path, monkeypatch):
    """Ctrl-C while the weights file is being written (the race CI once hit) loses one epoch, never the run."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 2), np.float32)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[backup.EpochBackup(RunDir(str(tmp_path)))])
    saved = [w.copy() for w in model.get_weights()]

    def half_written(path, *args, **kwargs):
        with open(path, "wb") as f:
            f.write(b"\x89HDF\r\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save_weights", half_written)
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, epochs=2, initial_epoch=1, verbose=0, callbacks=[backup.EpochBackup(RunDir(str(tmp_path)))])
    monkeypatch.undo()

    fresh = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    fresh.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert backup.restore_backup(fresh, RunDir(str(tmp_path))) == 1
    for a, b in zip(fresh.get_weights(), saved):
        np.testing.assert_array_equal(a, b)
    assert int(fresh.optimizer.iterations.numpy()) == 1


def test_unloadable_backup_is_one_clear_error(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    backup_dir = tmp_path / "backup"
    backup_dir.mkdir()
    (backup_dir / "epoch-0001.weights.h5").write_bytes(b"junk")
    (backup_dir / "state.json").write_text('{"generations": [{"epoch": 1, "weights": "epoch-0001.weights.h5"}]}')
    with pytest.raises(ConfigError, match="delete that directory to retrain from scratch"):
        backup.restore_backup(model, RunDir(str(tmp_path)))


def test_a_run_backed_up_by_keras_backup_and_restore_still_resumes(tmp_path):
    """Model directories from before EpochBackup hold Keras's backup files; they resume, not restart."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 2), np.float32)
    backup_dir = str(tmp_path / "backup")
    model.fit(
        x,
        y,
        epochs=2,
        verbose=0,
        callbacks=[keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=False, double_checkpoint=True)],
    )
    fresh = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    fresh.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert backup.restore_backup(fresh, RunDir(str(tmp_path))) == 2
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_resumed_run_that_had_run_out_of_patience_trains_no_more(tmp_path, capsys):
    """A run stopped early and killed before its end was written resumes after its last epoch with nothing
    left to train (it used to train one epoch more): `loop.resume`, which every strategy's run calls."""
    from nplm_tf.training import loop

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    run = RunDir(str(tmp_path))
    model.fit(
        np.ones((8, 3), np.float32),
        np.zeros((8, 2), np.float32),
        epochs=3,
        verbose=0,
        callbacks=[backup.EpochBackup(run)],
    )
    run.write_history({e: {"valid_perplexity": v} for e, v in enumerate([10.0, 11.0, 12.0])})
    assert loop.resume(model, run, helpers.tiny_config(epochs=10, patience=2)) == 10
    assert "stopping early: no better valid perplexity for 2 epochs" in capsys.readouterr().out
    assert loop.resume(model, run, helpers.tiny_config(epochs=10, patience=3)) == 3  # patience left: epoch 4 next


def test_a_multi_worker_run_checkpointed_by_an_older_version_still_resumes(tmp_path):
    """Multi-worker runs once kept tf.train checkpoints (model, optimizer, epoch) in checkpoints/ instead of
    backup/; they resume from them, not restart."""
    import tensorflow as tf

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(np.ones((8, 3), np.float32), np.zeros((8, 2), np.float32), epochs=3, verbose=0)
    epoch = tf.Variable(3, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, epoch=epoch)
    tf.train.CheckpointManager(checkpoint, str(tmp_path / "checkpoints"), max_to_keep=2).save()
    fresh = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    fresh.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    assert backup.restore_backup(fresh, RunDir(str(tmp_path))) == 3
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(fresh.optimizer.iterations.numpy()) == 3
    assert backup.restore_backup(fresh, RunDir(str(tmp_path / "elsewhere"))) == 0


def test_token_nll_and_its_gradient_match_tensorflows_cross_entropy():
    import tensorflow as tf

    from nplm_tf.network import model as model_lib

    rng = np.random.default_rng(0)
    logits = rng.normal(scale=4, size=(6, 50)).astype(np.float32)
    logits[5, 7] = -300.0  # its probability underflows float32: the exact branch must answer
    targets = np.array([3, 0, 49, 3, 12, 7], np.int32)
    weights = tf.constant(rng.normal(size=6).astype(np.float32))
    results = []
    for fn in (model_lib.token_nll, lambda t, z: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=t, logits=z)):
        z = tf.constant(logits)
        with tf.GradientTape() as tape:
            tape.watch(z)
            nll = fn(tf.constant(targets), z)
            weighted = tf.reduce_sum(nll * weights)
        results.append((nll.numpy(), tape.gradient(weighted, z).numpy()))
    (nll, grad), (ref_nll, ref_grad) = results
    assert np.isfinite(nll).all() and nll[5] > 290
    np.testing.assert_allclose(nll, ref_nll, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-6)


def test_lazy_fused_adam_updates_only_the_rows_of_a_sparse_gradient():
    import tensorflow as tf

    from nplm_tf.network import optimizers

    rng = np.random.default_rng(1)
    start = rng.normal(size=(6, 3)).astype("float32")
    variable = keras.Variable(start.copy())
    optimizer = optimizers.FusedAdam(learning_rate=0.1, lazy=True)
    optimizer.build([variable])
    rows, grads = [4, 1, 4], rng.normal(size=(3, 3)).astype("float32")  # row 4 twice: summed, squares summed
    optimizer.apply([tf.IndexedSlices(tf.constant(grads), tf.constant(rows), tf.constant([6, 3]))], [variable])
    g = {1: grads[1], 4: grads[0] + grads[2]}
    g2 = {1: grads[1] ** 2, 4: grads[0] ** 2 + grads[2] ** 2}
    alpha = 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9)
    expected = start.copy()
    for row in (1, 4):
        m, v = 0.1 * g[row], 0.001 * g2[row]
        expected[row] -= alpha * m / (np.sqrt(v) + 1e-7)
    np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-5, atol=1e-7)
    moments = optimizer._momentums[0].numpy()
    assert np.all(moments[[0, 2, 3, 5]] == 0) and np.all(moments[[1, 4]] != 0)
    assert optimizers.FusedAdam.from_config(optimizer.get_config()).lazy


def test_a_perplexity_past_float64_is_inf_not_an_overflow_error():
    from nplm_tf.network import scoring

    assert scoring.Score(nll=800.0 * 3, tokens=3, unk=0).perplexity == float("inf")  # was OverflowError
    assert scoring.Score(nll=2.0, tokens=1, unk=0).perplexity == pytest.approx(7.389056, rel=1e-6)


def test_the_divergence_sentence_says_how_to_end_the_run_with_the_epochs_saved_before_it():
    from nplm_tf.training import callbacks

    callbacks.check_finite(2, "train loss", 5.25)  # a finite value passes
    with pytest.raises(callbacks.TrainingDiverged, match=r"in epoch 3 \(valid perplexity inf\); .*--epochs=2 ends"):
        callbacks.check_finite(2, "valid perplexity", float("inf"))


def test_the_readmes_python_example_trains_exports_and_scores(tmp_path):
    """README.md's "From Python" code, run as written in a directory holding its three files."""
    readme = open(os.path.join(helpers.ROOT, "README.md"), encoding="utf-8").read()
    lines = readme.split("**From Python.**", 1)[1].split("\n\n", 1)[1].splitlines()
    end = next(i for i, line in enumerate(lines) if line and not line.startswith("    "))  # the indented code
    code = "\n".join(line[4:] for line in lines[:end])
    assert "train_and_evaluate" in code and 'corpus.files_corpus("train.txt", "valid.txt", "test.txt")' in code
    for name, path in helpers.tiny_corpus_files(tmp_path).items():
        os.rename(path, tmp_path / f"{name}.txt")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(tmp_path / "runs" / "py" / "metrics.json"))
    printed = result.stdout.strip().splitlines()[-1]
    assert printed.startswith(repr(metrics["test_perplexity"]) + " tf.Tensor([")  # then the export's perplexity
    assert len(metrics["epochs"]) == 2 and metrics["config"]["hidden_dim"] == 60
    # The directory remembers its corpus as the binary's do, for `evaluate` and `query` to read from anywhere.
    remembered = json.load(open(tmp_path / "runs" / "py" / "corpus.json"))
    assert remembered == {"corpus": "files", **{f"{s}_files": str(tmp_path / f"{s}.txt") for s in corpus_lib.SPLITS}}


def test_a_new_full_softmax_run_with_a_large_vocabulary_is_told_of_short_lists_and_sampling(tmp_path, capsys):
    from nplm_tf.core.config import Config
    from nplm_tf.core.run_dir import TrainingLock
    from nplm_tf.training import run_setup
    from nplm_tf.training.data import LARGE_VOCABULARY

    def corpus(words):  # every word once in train (min_count=1), valid and test from its words
        return corpus_lib.files_corpus(*helpers.vocabulary_files(tmp_path, words).values())

    def set_up(name, texts, **fields):
        model_dir = str(tmp_path / name)
        with TrainingLock(model_dir) as lock:
            run_setup.set_up_run(Config(order=2, min_count=1, **fields), model_dir, texts, None, lock)
        return capsys.readouterr().out

    large = corpus(LARGE_VOCABULARY - 2)  # with </s> and <unk>: |V| = LARGE_VOCABULARY
    note = f"note: |V| = {LARGE_VOCABULARY:,}, so the full softmax's output layer takes most of each step"
    assert note in set_up("full", large)
    assert "note:" not in set_up("full", large)  # the same run set up again (resumed): said once
    assert "note:" not in set_up("shortlist", large, shortlist=4000)
    assert "note:" not in set_up("sampled", large, loss="nce")
    assert "note:" not in set_up("smaller", corpus(LARGE_VOCABULARY - 3))


def test_a_train_split_without_unk_is_noted_when_valid_holds_unknown_words(tmp_path, capsys):
    from nplm_tf.core.config import Config
    from nplm_tf.training.data import prepare_data

    def texts(valid):
        for name, text in (("train", "a b a c d\nb c a\n"), ("valid", valid), ("test", "a b\n")):
            (tmp_path / f"{name}.txt").write_text(text)
        return corpus_lib.files_corpus(*(str(tmp_path / f"{n}.txt") for n in ("train", "valid", "test")))

    data = prepare_data(Config(order=2, min_count=1), texts("a zz b\nc a yy b\n"))
    assert data.tokens == {"train": 10, "valid": 9, "test": 3}  # words and one </s> a line
    note = "never trains on <unk>, yet 2 of valid's 9 tokens (22.2%) are words outside it"
    assert note in capsys.readouterr().out
    prepare_data(Config(order=2, min_count=2), texts("a zz b\nc a yy b\n"))  # d is <unk> in train
    assert "note:" not in capsys.readouterr().out
    prepare_data(Config(order=2, min_count=1), texts("a d b\nc a b\n"))  # nothing unknown in valid
    assert "note:" not in capsys.readouterr().out


def test_the_default_precision_is_the_machines_faster_one_and_a_run_keeps_its_own(tmp_path):
    """`train` without --precision: a new run takes `hardware.fast_precision`'s choice, says why and records it
    in config.json and metrics.json; a run that exists resumes in the precision it trained in."""
    from nplm_tf.core import hardware

    paths = helpers.tiny_corpus_files(tmp_path, train=40, valid=8, test=8)
    tiny = [f for f in helpers.TINY_FLAGS if not f.startswith("--precision")] + ["--noexport"]  # not what is tested
    new = str(tmp_path / "new")
    result = helpers.run_binary("nplm_tf.train", f"--model_dir={new}", "--epochs=1", *tiny, *helpers.files_flags(paths))
    assert result.returncode == 0, result.stderr[-2000:]
    chosen, why = hardware.fast_precision()
    assert f"precision: {chosen} (--precision=auto: {why}" in result.stdout
    assert json.load(open(os.path.join(new, "config.json")))["precision"] == chosen
    assert json.load(open(os.path.join(new, "metrics.json")))["config"]["precision"] == chosen
    other = "float32" if chosen == "mixed_bfloat16" else "mixed_bfloat16"
    old = str(tmp_path / "old")
    first = helpers.run_binary(
        "nplm_tf.train", f"--model_dir={old}", "--epochs=1", f"--precision={other}", *tiny, *helpers.files_flags(paths)
    )
    assert first.returncode == 0, first.stderr[-2000:]
    more = helpers.run_binary("nplm_tf.train", f"--model_dir={old}", "--epochs=2", *tiny, *helpers.files_flags(paths))
    assert more.returncode == 0, more.stderr[-2000:]
    assert "precision: " not in more.stdout and "epoch 2/" in more.stdout
    assert json.load(open(os.path.join(old, "metrics.json")))["config"]["precision"] == other


def test_a_long_epoch_prints_its_progress_every_few_minutes_and_a_short_one_nothing(monkeypatch, capsys):
    from nplm_tf.training import callbacks

    clock = [1000.0]
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: clock[0])
    progress = callbacks.EpochProgress(train_tokens=1_000_000, batch_size=100, epochs=3, every=300)
    progress.on_epoch_begin(1)
    for batch, now in ((99, 1100), (1999, 1299), (2999, 1300), (5999, 1500), (7499, 1600)):
        clock[0] = now
        progress.on_train_batch_end(batch)
    assert capsys.readouterr().out.splitlines() == [
        "epoch 2/3: 30% of its 1,000,000 tokens, 1,000 tokens/s, about 12 min left",  # at 300 s: 300,000 tokens
        "epoch 2/3: 75% of its 1,000,000 tokens, 1,250 tokens/s, about 3 min left",  # 300 s after the last line
    ]
    progress.on_epoch_begin(2)  # a new epoch starts its own clock: 100 s into it, nothing yet
    clock[0] = 1700
    progress.on_train_batch_end(9999)
    assert capsys.readouterr().out == ""


def test_self_normalized_training_brings_ln_z_near_zero(tmp_path):
    """--self_normalize=α trains −ln P + α·(ln Z)²: ln Z on valid (which metrics.json reports for every full
    softmax) is nearer 0 and spreads less than in the same run without it, at nearly the same perplexity."""
    corpus = files_corpus(tmp_path)
    runs = {}
    for alpha in (0.0, 0.5):
        config = helpers.tiny_config(epochs=4, self_normalize=alpha)
        runs[alpha] = trainer.train_and_evaluate(config, str(tmp_path / f"m{alpha}"), corpus, verbose=0, export=False)
    plain, normalized = runs[0.0]["valid_log_normalizer"], runs[0.5]["valid_log_normalizer"]
    assert abs(normalized["mean"]) < 0.5 * abs(plain["mean"]) and normalized["std"] < plain["std"]
    assert runs[0.5]["valid_perplexity"] < 1.1 * runs[0.0]["valid_perplexity"]
    with pytest.raises(ConfigError, match="self_normalize=0.1 needs the full softmax trained exactly"):
        helpers.tiny_config(self_normalize=0.1, shortlist=5)
