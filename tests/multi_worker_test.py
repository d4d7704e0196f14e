"""MultiWorkerMirroredStrategy training: two worker processes on 127.0.0.1 against one process."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nplm_tf import cli
from tests import helpers

TINY = ["--order=3", "--feature_dim=8", "--hidden_dim=16", "--min_count=1", "--batch_size=16",
        "--learning_rate=0.01", "--lr_decay=0", "--weight_decay=0.001", "--precision=float32", "--shuffle_buffer=64"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    paths = helpers.tiny_corpus_files(tmp_path_factory.mktemp("mw"), train=50, valid=8, test=8)
    return ["--corpus=files", f"--train_files={paths['train']}", f"--valid_files={paths['valid']}",
            f"--test_files={paths['test']}"]


def start_workers(model_dir, epochs, corpus, cluster=None, extra=()):
    cluster = cluster or [f"127.0.0.1:{p}" for p in cli.loopback_ports(2)]
    procs = []
    for index in range(len(cluster)):
        tf_config = json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}})
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "nplm_tf.train", "--strategy=multi_worker", f"--model_dir={model_dir}",
             f"--epochs={epochs}", *TINY, *extra, *corpus],
            cwd=helpers.ROOT, env=dict(os.environ, TF_CONFIG=tf_config, NLTK_DATA=helpers.SHARED_NLTK),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs, cluster


def finish(procs, timeout=300):
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    return outputs


def history(model_dir):
    with open(os.path.join(model_dir, "history.json")) as f:
        return [v for _, v in sorted(json.load(f).items(), key=lambda kv: int(kv[0]))]


@pytest.fixture(scope="module")
def two_workers(corpus, tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("two") / "model")
    procs, _ = start_workers(model_dir, 2, corpus)
    finish(procs)
    return model_dir


@pytest.fixture(scope="module")
def one_process(corpus, tmp_path_factory):
    one = str(tmp_path_factory.mktemp("one") / "model")
    result = helpers.run_binary("nplm_tf.train", "--strategy=multi_worker", f"--model_dir={one}", "--epochs=2",
                                *TINY, *corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    return one


def test_two_workers_train_to_the_same_loss_as_one_process(one_process, two_workers):
    single, double = history(one_process), history(two_workers)
    assert len(single) == len(double) == 2
    for a, b in zip(single, double):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
        assert b["valid_perplexity"] == pytest.approx(a["valid_perplexity"], rel=1e-5)
    metrics = json.load(open(os.path.join(two_workers, "metrics.json")))
    assert metrics["workers"] == 2 and os.path.isfile(os.path.join(metrics["export"], "saved_model.pb"))
    assert not glob.glob(os.path.join(two_workers, ".checkpoints-worker-*"))  # scratch copies removed


def test_a_killed_worker_and_a_restarted_job_resume_from_the_checkpoint(corpus, two_workers, tmp_path):
    model_dir = str(tmp_path / "model")
    procs, cluster = start_workers(model_dir, 3, corpus)
    try:
        deadline = time.time() + 240
        while not os.path.isfile(os.path.join(model_dir, "checkpoints", "checkpoint")):  # epoch 1 saved
            assert time.time() < deadline and all(p.poll() is None for p in procs), "no checkpoint written"
            time.sleep(0.1)
        procs[1].send_signal(signal.SIGKILL)  # one worker dies ...
        procs[1].wait(timeout=30)
        procs[0].kill()  # ... and the job is stopped, as a cluster manager would
        procs[0].wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    done_before = len(history(model_dir))
    assert 1 <= done_before < 3
    procs, _ = start_workers(model_dir, 3, corpus)
    outputs = finish(procs)
    assert "resumed from" in outputs[0][0]
    records = history(model_dir)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    # Resuming changes nothing: the first two epochs equal those of an uninterrupted two-worker run.
    for a, b in zip(history(two_workers), records[:2]):
        assert b["valid_perplexity"] == pytest.approx(a["valid_perplexity"], rel=1e-5)
    assert json.load(open(os.path.join(model_dir, "metrics.json")))["config"]["epochs"] == 3


def test_local_sgd_on_one_worker_is_synchronous_training(corpus, one_process, tmp_path):
    model_dir = str(tmp_path / "local1")
    result = helpers.run_binary("nplm_tf.train", "--strategy=multi_worker", f"--model_dir={model_dir}", "--epochs=2",
                                "--sync_every=4", *TINY, *corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    for a, b in zip(history(one_process), history(model_dir), strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
        assert b["valid_perplexity"] == pytest.approx(a["valid_perplexity"], rel=1e-5)


def simulate_local_sgd(corpus_flags, workers, sync_every, epochs):
    """Local SGD by hand in this process: one model per worker, weights averaged every `sync_every` steps."""
    import numpy as np
    import tensorflow as tf

    from nplm_tf import multi_worker_lib, train_lib
    from nplm_tf.config import Config
    from pipelines import corpus as corpus_lib

    flags = dict(f[2:].split("=", 1) for f in TINY)
    config = Config(order=int(flags["order"]), feature_dim=int(flags["feature_dim"]),
                    hidden_dim=int(flags["hidden_dim"]), min_count=1, batch_size=int(flags["batch_size"]),
                    learning_rate=0.01, lr_decay=0.0, weight_decay=0.001, precision="float32", shuffle_buffer=64,
                    epochs=epochs, sync_every=sync_every)
    paths = dict(f[2:].split("=", 1) for f in corpus_flags[1:])
    corpus = corpus_lib.files_corpus(paths["train_files"], paths["valid_files"], paths["test_files"])
    data = train_lib.prepare_data(config, corpus)
    copies = []
    for _ in range(workers):
        model, optimizer = multi_worker_lib.build(config, data.vocab.size, None, local=True)
        train_lib.init_output_bias(model, data.vocab)
        copies.append((model, optimizer, multi_worker_lib.make_local_train_steps(model, optimizer)))

    def average(get):
        for group in zip(*(get(model, optimizer) for model, optimizer, _ in copies)):
            mean = np.mean([v.numpy() for v in group], axis=0)
            for v in group:
                v.assign(mean)

    steps = data.tokens["train"] // config.batch_size
    steps -= steps % workers
    losses = []
    for epoch in range(epochs):
        iterators = [iter(multi_worker_lib.local_train_dataset(config, data, corpus, epoch, steps, workers, i))
                     for i in range(workers)]
        nll, done = 0.0, 0
        while done < steps // workers:
            count = min(sync_every, steps // workers - done)
            nll += sum(float(train(it, tf.constant(count))) for (_, _, train), it in zip(copies, iterators))
            done += count
            average(lambda m, o: m.trainable_variables)
        average(lambda m, o: multi_worker_lib._float_variables(o))
        losses.append(nll / (steps * config.batch_size))
    return copies[0][0], losses


def test_local_sgd_two_workers_equal_averaging_by_hand(corpus, tmp_path):
    import numpy as np

    model_dir = str(tmp_path / "local2")
    procs, _ = start_workers(model_dir, 2, corpus, extra=["--sync_every=3", "--patience=5"])
    outputs = finish(procs)
    assert '"valid_perplexity"' in outputs[0][0]
    model, losses = simulate_local_sgd(corpus, workers=2, sync_every=3, epochs=2)
    records = history(model_dir)
    assert [r["train_loss"] for r in records] == pytest.approx(losses, rel=1e-5)
    best = 1 + int(np.argmin([r["valid_perplexity"] for r in records]))
    if best == 2:  # the job's saved best weights are the simulation's final ones
        saved = model.get_layer("nplm")
        expected = [w.numpy() for w in saved.weights]
        model.load_weights(os.path.join(model_dir, "best.weights.h5"))
        for want, got in zip(expected, saved.weights):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    metrics = json.load(open(os.path.join(model_dir, "metrics.json")))
    assert metrics["workers"] == 2 and metrics["config"]["sync_every"] == 3


def test_sync_every_needs_the_multi_worker_strategy(corpus, tmp_path):
    result = helpers.run_binary("nplm_tf.train", f"--model_dir={tmp_path / 'm'}", "--sync_every=4", *TINY, *corpus)
    assert result.returncode != 0
    assert helpers.error_lines(result.stderr) == [
        "error: sync_every=4 needs --strategy=multi_worker (other strategies all-reduce gradients every step)."]
    assert not os.path.exists(tmp_path / "m")
