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


def start_workers(model_dir, epochs, corpus, cluster=None):
    cluster = cluster or [f"127.0.0.1:{p}" for p in cli.loopback_ports(2)]
    procs = []
    for index in range(len(cluster)):
        tf_config = json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}})
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "nplm_tf.train", "--strategy=multi_worker", f"--model_dir={model_dir}",
             f"--epochs={epochs}", *TINY, *corpus],
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


def test_two_workers_train_to_the_same_loss_as_one_process(corpus, two_workers, tmp_path):
    one = str(tmp_path / "one")
    result = helpers.run_binary("nplm_tf.train", "--strategy=multi_worker", f"--model_dir={one}", "--epochs=2",
                                *TINY, *corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    single, double = history(one), history(two_workers)
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
