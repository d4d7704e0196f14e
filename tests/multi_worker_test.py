"""MultiWorkerMirroredStrategy training: two worker processes on 127.0.0.1 against one process."""

import fcntl
import json
import math
import os
import re
import signal
import time

import pytest

from nplm_tf.core import run_dir
from nplm_tf.core.config import Config
from nplm_tf.training import strategies
from tests import helpers

TINY = [f for f in helpers.TINY_FLAGS if not f.startswith("--weight_decay")] + ["--weight_decay=0.001"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    paths = helpers.tiny_corpus_files(tmp_path_factory.mktemp("mw"), train=50, valid=8, test=8)
    return helpers.files_flags(paths)


NOEXPORT = "--noexport"  # what these tests check is training; the two-worker run's export is checked once


def start_workers(model_dir, epochs, corpus, cluster=None, extra=()):
    cluster = cluster or [f"127.0.0.1:{p}" for p in strategies.loopback_ports(2)]
    procs = []
    for index in range(len(cluster)):
        tf_config = json.dumps({"cluster": {"worker": cluster}, "task": {"type": "worker", "index": index}})
        procs.append(
            helpers.start_binary(
                "nplm_tf.train",
                "--strategy=multi_worker",
                f"--model_dir={model_dir}",
                f"--epochs={epochs}",
                *TINY,
                *extra,
                *corpus,
                env={"TF_CONFIG": tf_config},
            )
        )
    return procs, cluster


def wait_all(procs, timeout):
    """Each worker's (stdout, stderr) once all have exited; any still running after `timeout` is killed."""
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outputs


def finish(procs, timeout=300):
    outputs = wait_all(procs, timeout)
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    return outputs


def history(model_dir):
    with open(os.path.join(model_dir, "history.json")) as f:
        return [v for _, v in sorted(json.load(f).items(), key=lambda kv: int(kv[0]))]


def train_one_process(model_dir, corpus, *extra):
    """Two epochs under the multi-worker strategy in one process (a cluster of one)."""
    result = helpers.run_binary(
        "nplm_tf.train",
        "--strategy=multi_worker",
        f"--model_dir={model_dir}",
        "--epochs=2",
        NOEXPORT,
        *TINY,
        *extra,
        *corpus,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir


def assert_same_training(model_dir, other_dir):
    """Every epoch's train loss and valid perplexity agree (rel 1e-5)."""
    for a, b in zip(history(model_dir), history(other_dir), strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
        assert b["valid_perplexity"] == pytest.approx(a["valid_perplexity"], rel=1e-5)


@pytest.fixture(scope="module")
def two_workers(corpus, tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("two") / "model")
    procs, _ = start_workers(model_dir, 2, corpus)
    finish(procs)
    return model_dir


@pytest.fixture(scope="module")
def one_process(corpus, tmp_path_factory):
    return train_one_process(str(tmp_path_factory.mktemp("one") / "model"), corpus)


def test_two_workers_train_to_the_same_loss_as_one_process(one_process, two_workers):
    single, double = history(one_process), history(two_workers)
    assert len(single) == len(double) == 2
    assert_same_training(one_process, two_workers)
    metrics = json.load(open(os.path.join(two_workers, "metrics.json")))
    assert metrics["workers"] == 2 and os.path.isfile(os.path.join(metrics["export"], "saved_model.pb"))
    assert not os.path.exists(os.path.join(two_workers, "checkpoints"))  # backed up as every run, in backup/
    assert run_dir.RunDir(two_workers).read_backup_state()[0]["epoch"] == 2


def test_a_killed_worker_and_a_restarted_job_resume_from_the_backup(corpus, two_workers, tmp_path):
    model_dir = str(tmp_path / "model")
    procs, cluster = start_workers(model_dir, 3, corpus, extra=[NOEXPORT])
    try:
        deadline = time.time() + 240
        while not os.path.isfile(os.path.join(model_dir, "backup", "state.json")):  # epoch 1 saved
            assert time.time() < deadline and all(p.poll() is None for p in procs), "no backup written"
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
    procs, _ = start_workers(model_dir, 3, corpus, extra=[NOEXPORT])
    outputs = finish(procs)
    assert re.search(r"resuming after epoch [12] of 3 from ", outputs[0][0])  # the trainer's wording
    records = history(model_dir)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    # Resuming changes nothing: the first two epochs equal those of an uninterrupted two-worker run.
    for a, b in zip(history(two_workers), records[:2]):
        assert b["valid_perplexity"] == pytest.approx(a["valid_perplexity"], rel=1e-5)
    assert json.load(open(os.path.join(model_dir, "metrics.json")))["config"]["epochs"] == 3


@pytest.mark.parametrize("tail", ["backoff", "network"])  # a masked Keras loss; a custom objective
def test_two_workers_train_a_short_list_as_one_process_does(tail, corpus, tmp_path):
    flags = ["--shortlist=8", f"--tail={tail}"]
    one = train_one_process(str(tmp_path / "one"), corpus, *flags)
    two = str(tmp_path / "two")
    finish(start_workers(two, 2, corpus, extra=[*flags, NOEXPORT])[0])
    assert_same_training(one, two)
    assert not os.path.exists(os.path.join(two, "export"))  # --noexport: the chief writes everything else
    assert "export" not in json.load(open(os.path.join(two, "metrics.json")))


def test_two_workers_train_with_a_sampled_loss(corpus, tmp_path):
    # Each worker gathers the output rows of its batch's targets and noise words; their gradients are
    # all-gathered, which failed ("Shape mismatch in the collective instance") when the workers' counts of
    # distinct rows differed.
    model_dir = str(tmp_path / "nce")
    finish(start_workers(model_dir, 2, corpus, extra=["--loss=nce", "--num_sampled=6", NOEXPORT])[0])
    valid = [record["valid_perplexity"] for record in history(model_dir)]
    assert len(valid) == 2 and valid[1] < valid[0] < 20  # |V| = 20: better than uniform, and improving
    metrics = json.load(open(os.path.join(model_dir, "metrics.json")))
    assert metrics["workers"] == 2 and math.isfinite(metrics["valid_log_normalizer"]["mean"])


def test_two_workers_validate_and_keep_the_weight_average_as_one_process_does(corpus, one_process, tmp_path):
    """The average is the run loop's callbacks' (once refused here: the multi-worker loop ran its own epochs)."""
    one = train_one_process(str(tmp_path / "one"), corpus, "--average=0.99")
    two = str(tmp_path / "two")
    finish(start_workers(two, 2, corpus, extra=["--average=0.99", NOEXPORT])[0])
    assert_same_training(one, two)
    local = train_one_process(str(tmp_path / "local1"), corpus, "--average=0.99", "--sync_every=4")
    assert_same_training(one, local)
    averaged = [r["valid_perplexity"] for r in history(one)]
    plain = [r["valid_perplexity"] for r in history(one_process)]
    assert all(a != pytest.approx(p, rel=1e-3) for a, p in zip(averaged, plain))  # the average is what validated


def test_local_sgd_on_one_worker_is_synchronous_training(corpus, one_process, tmp_path):
    local = train_one_process(str(tmp_path / "local1"), corpus, "--sync_every=4")
    assert_same_training(one_process, local)


def local_sgd_copies(corpus_flags, workers, epochs):
    """The TINY config, the corpus and its data, and one (model, optimizer, train steps) per worker."""
    from nplm_tf.core.config import Config
    from nplm_tf.distributed import local_sgd, multi_worker
    from nplm_tf.network import heads
    from nplm_tf.training import trainer
    from nplm_tf.training.data import prepare_data
    from pipelines import corpus as corpus_lib

    flags = dict(f[2:].split("=", 1) for f in TINY)
    config = Config(
        order=int(flags["order"]),
        feature_dim=int(flags["feature_dim"]),
        hidden_dim=int(flags["hidden_dim"]),
        min_count=1,
        batch_size=int(flags["batch_size"]),
        learning_rate=0.01,
        lr_decay=0.0,
        weight_decay=0.001,
        precision="float32",
        shuffle_buffer=64,
        epochs=epochs,
    )
    paths = dict(f[2:].split("=", 1) for f in corpus_flags[1:])
    corpus = corpus_lib.files_corpus(paths["train_files"], paths["valid_files"], paths["test_files"])
    data = prepare_data(config, corpus)
    copies = []
    for _ in range(workers):
        model, optimizer = multi_worker.build(config, heads.make(config, data.vocab.size), None, local=True)
        trainer.init_output_bias(model, data.vocab)
        copies.append((model, optimizer, local_sgd.make_local_train_steps(model, optimizer)))
    return config, corpus, data, copies


def simulate_local_sgd(corpus_flags, workers, sync_every, epochs):
    """Local SGD by hand in this process: one model per worker, weights averaged every `sync_every` steps."""
    import numpy as np
    import tensorflow as tf

    from nplm_tf.distributed import local_sgd

    config, corpus, data, copies = local_sgd_copies(corpus_flags, workers, epochs)

    def average(get):
        for group in zip(*(get(model, optimizer) for model, optimizer, _ in copies)):
            mean = np.mean([v.numpy() for v in group], axis=0)
            for v in group:
                v.assign(mean)

    steps = data.tokens["train"] // config.batch_size
    steps -= steps % workers
    losses = []
    for epoch in range(epochs):
        iterators = [
            iter(local_sgd.local_train_dataset(config, data, corpus, epoch, steps, workers, i)) for i in range(workers)
        ]
        nll, done = 0.0, 0
        while done < steps // workers:
            count = min(sync_every, steps // workers - done)
            nll += sum(
                float(train(it, tf.constant(count), tf.constant(0))) for (_, _, train), it in zip(copies, iterators)
            )
            done += count
            average(lambda m, o: m.trainable_variables)
        average(lambda m, o: local_sgd._float_variables(o))
        losses.append(nll / (steps * config.batch_size))
    return copies[0][0], losses


def test_local_sgd_two_workers_equal_averaging_by_hand(corpus, tmp_path):
    import numpy as np

    model_dir = str(tmp_path / "local2")
    procs, _ = start_workers(model_dir, 2, corpus, extra=["--sync_every=3", "--patience=5", NOEXPORT])
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
        "error: sync_every=4 needs --strategy=multi_worker (other strategies all-reduce gradients every step)."
    ]
    assert not os.path.exists(tmp_path / "m")


def test_a_bad_tf_config_is_one_sentence_before_tensorflow_reads_it(corpus, tmp_path):
    """Once a JSONDecodeError traceback from TensorFlow's cluster resolver (or its own errors, after the flags)."""
    cases = {
        "{bad": "TF_CONFIG is not valid JSON",
        "[1]": 'TF_CONFIG needs a "cluster" object of jobs',
        '{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}': 'TF_CONFIG needs a "cluster"',
        '{"cluster": {"worker": ["h:1"]}, "task": {"type": "chief", "index": 0}}': "must name a job of its cluster",
        '{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 1}}': "and an index within it",
    }
    for text, message in cases.items():
        with pytest.raises(strategies.ConfigError, match=message.replace("(", r"\(")):
            strategies.check_tf_config({"TF_CONFIG": text})
    strategies.check_tf_config({})  # no TF_CONFIG: one local worker
    strategies.check_tf_config(
        {"TF_CONFIG": json.dumps({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1}})}
    )
    result = helpers.run_binary(
        "nplm_tf.train",
        f"--model_dir={tmp_path / 'm'}",
        "--strategy=multi_worker",
        *TINY,
        *corpus,
        env={"TF_CONFIG": "{bad"},
    )
    helpers.assert_one_sentence(result, "TF_CONFIG is not valid JSON")
    assert not os.path.exists(tmp_path / "m")


@pytest.mark.parametrize(
    "total,rates,workers,expected",
    [
        (64, None, 2, [32, 32]),
        (64, [3.0, 1.0], 2, [48, 16]),
        (64, [30.0, 34.0], 2, [30, 34]),
        (7, [1.0, 1.0, 1.0], 3, [3, 2, 2]),  # leftovers by largest remainder, ties to the lower index
        (10, [1000.0, 1.0], 2, [9, 1]),  # every worker keeps at least one batch
        (2, [1.0, 5.0, 1.0], 3, [0, 2, 0]),  # fewer batches than workers
        (6, [0.0, 2.0], 2, [3, 3]),  # a speed not measured yet: equal shares
    ],
)
def test_deal_splits_a_round_by_speed(total, rates, workers, expected):
    from nplm_tf.distributed import local_sgd

    assert local_sgd.deal(total, rates, workers) == expected


def test_deal_always_hands_out_every_batch():
    import random

    from nplm_tf.distributed import local_sgd

    rng = random.Random(0)
    for _ in range(500):
        workers = rng.randint(1, 5)
        total = rng.randint(0, 100)
        rates = [rng.uniform(0.1, 50.0) for _ in range(workers)]
        counts = local_sgd.deal(total, rates, workers)
        assert sum(counts) == total and min(counts) >= (1 if total >= workers else 0)


def test_local_train_steps_pass_over_the_skipped_batches():
    import tensorflow as tf

    from nplm_tf.core.config import Config
    from nplm_tf.distributed import local_sgd
    from nplm_tf.network import heads, optimizers
    from nplm_tf.network import model as model_lib

    config = Config(order=3, feature_dim=4, hidden_dim=8, precision="float32", sync_every=2)
    model = model_lib.build_model(config, heads.make(config, 40))
    optimizer = optimizers.make_optimizer(config, model.head)
    optimizer.build(model.trainable_variables)
    train = local_sgd.make_local_train_steps(model, optimizer)
    batches = tf.data.Dataset.range(30).map(
        lambda i: (tf.fill([2, 2], tf.cast(i, tf.int32)), tf.fill([2], tf.cast(i, tf.int32)))
    )
    iterator = iter(batches)
    train(iterator, tf.constant(3), tf.constant(5))  # batches 0-4 passed over, 5-7 trained on
    assert int(optimizer.iterations.numpy()) == 3
    assert int(next(iterator)[1][0]) == 8


def simulate_balanced_local_sgd(corpus_flags, workers, epochs, deals):
    """`--balance_workers` by hand: contiguous shares as dealt in `deals` (by epoch, by round), each round's
    weighted mean taken one round late (w += m - s), and a synchronous weighted mean of everything at the end."""
    import numpy as np
    import tensorflow as tf

    from nplm_tf.distributed import local_sgd

    config, corpus, data, copies = local_sgd_copies(corpus_flags, workers, epochs)
    steps = data.tokens["train"] // config.batch_size
    steps -= steps % workers
    losses = []

    def weighted(groups, shares):
        for group in groups:
            total = sum(v.numpy() * np.float32(f) for v, f in zip(group, shares))
            for v in group:
                v.assign(total)

    for epoch in range(epochs):
        iterators = [
            iter(local_sgd.local_train_dataset(config, data, corpus, epoch, steps, 1, 0)) for _ in range(workers)
        ]
        skips, nll, pending = [0] * workers, 0.0, None
        for r, counts in enumerate(deals[epoch]):
            total = sum(counts)
            for i, ((_, _, train), it) in enumerate(zip(copies, iterators)):
                skip = skips[i] + sum(counts[:i])
                skips[i] = sum(counts[i + 1 :])
                nll += float(train(it, tf.constant(counts[i]), tf.constant(skip)))
            if pending is not None:
                snapshots, mean = pending
                for (model, _, _), snapshot in zip(copies, snapshots):
                    for w, s, m in zip(model.trainable_variables, snapshot, mean):
                        w.assign_add(m - s)
            shares = [c / total for c in counts]
            if r == len(deals[epoch]) - 1:
                weighted(zip(*(m.trainable_variables + local_sgd._float_variables(o) for m, o, _ in copies)), shares)
                pending = None
            else:
                snapshots = [[v.numpy() for v in m.trainable_variables] for m, _, _ in copies]
                mean = [sum(s * np.float32(f) for s, f in zip(group, shares)) for group in zip(*snapshots)]
                pending = (snapshots, mean)
        losses.append(nll / (steps * config.batch_size))
    return copies[0][0], losses


def test_balanced_workers_equal_their_dealing_done_by_hand(corpus, tmp_path):
    import numpy as np

    model_dir = str(tmp_path / "balanced")
    procs, _ = start_workers(
        model_dir, 2, corpus, extra=["--sync_every=3", "--balance_workers", "--patience=5", NOEXPORT]
    )
    finish(procs)
    records = history(model_dir)
    steps = sum(records[0]["batches_per_worker"])
    for record in records:  # every global batch of the epoch dealt once, in rounds of W*K
        assert sum(record["batches_per_worker"]) == steps
        assert [sum(c) for c in record["deals"]] == [6] * (steps // 6) + ([steps % 6] if steps % 6 else [])
        assert [sum(c[i] for c in record["deals"]) for i in range(2)] == record["batches_per_worker"]
    model, losses = simulate_balanced_local_sgd(corpus, 2, 2, [r["deals"] for r in records])
    assert [r["train_loss"] for r in records] == pytest.approx(losses, rel=1e-5)
    best = 1 + int(np.argmin([r["valid_perplexity"] for r in records]))
    if best == 2:
        saved = model.get_layer("nplm")
        expected = [w.numpy() for w in saved.weights]
        model.load_weights(os.path.join(model_dir, "best.weights.h5"))
        for want, got in zip(expected, saved.weights):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert json.load(open(os.path.join(model_dir, "metrics.json")))["config"]["balance_workers"] is True


def test_every_worker_refuses_what_the_chief_refuses_with_the_same_sentence(corpus, tmp_path):
    """Each worker checks --ngram_dir and the model directory's configuration itself, before the first collective
    (once only the chief did: the other worker then died at the barrier with an UnavailableError traceback)."""
    other = tmp_path / "other"
    other.mkdir()
    run_dir.RunDir(str(other)).write_config(Config(hidden_dim=7))
    cases = [
        (tmp_path / "m", ["--shortlist=5", f"--ngram_dir={tmp_path / 'nowhere'}"], "nowhere/vocab.tsv does not exist"),
        (other, [], "was set up for a run with another configuration"),  # config.json alone: no epoch finished
    ]
    for model_dir, extra, message in cases:
        before = sorted(os.listdir(model_dir)) if model_dir.exists() else None
        for returncode, errors, err in refusals(start_workers(model_dir, 1, corpus, extra=extra)[0]):
            assert returncode != 0 and len(errors) == 1 and message in errors[0], err[-2000:]
        assert (sorted(os.listdir(model_dir)) if model_dir.exists() else None) == before


def refusals(procs, timeout=120):
    """Each worker's exit code, error lines and standard error, once all have exited."""
    return [(p.returncode, helpers.error_lines(err), err) for p, (_, err) in zip(procs, wait_all(procs, timeout))]


def test_a_job_refused_by_another_processs_lock_says_so_on_every_worker(corpus, tmp_path):
    """Only the chief takes the directory's lock; the other workers learn of its refusal at the first barrier
    (once an UnavailableError traceback)."""
    model_dir = tmp_path / "m"
    finish(start_workers(model_dir, 1, corpus)[0])
    with open(model_dir / ".train.lock", "a+") as held:  # as another training process holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate(0)
        held.write(f"{os.getpid()}\n")
        held.flush()
        (chief, chief_errors, chief_err), (worker, worker_errors, worker_err) = refusals(
            start_workers(model_dir, 2, corpus)[0]
        )
    assert chief != 0 and chief_errors == [
        f"error: {model_dir} is being trained by another process (pid {os.getpid()}); wait for it to end, or use "
        "another --model_dir."
    ], chief_err[-2000:]
    assert worker != 0 and len(worker_errors) == 1, worker_err[-2000:]
    assert "another worker of this job stopped before training began" in worker_errors[0]


def test_a_diverging_job_stops_on_every_worker_before_saving_the_epoch(corpus, tmp_path):
    """Once it trained on to the end and exported NaN weights with exit code 0."""
    model_dir = tmp_path / "m"
    extra = ["--learning_rate=1e30", "--optimizer=sgd"]
    for returncode, errors, err in refusals(start_workers(model_dir, 2, corpus, extra=extra)[0]):
        assert returncode != 0 and len(errors) == 1 and "training diverged in epoch 1 (" in errors[0], err[-2000:]
    assert not any((model_dir / name).exists() for name in ("history.json", "best.weights.h5", "metrics.json"))
