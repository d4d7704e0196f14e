"""tf.distribute strategies by name, the CPU split MirroredStrategy needs, a worker's role, local ports."""

from __future__ import annotations

import json
import os
import socket

from nplm_tf.core.config import ConfigError


def check_cpu_devices(num_devices: int) -> None:
    if num_devices < 1:
        raise ConfigError(f"num_cpu_devices={num_devices} must be at least 1.")


def check_local_sgd(sync_every: int, multi_worker: bool) -> None:
    """Local SGD (`sync_every` > 1) runs only in the multi-worker loop; elsewhere it would be ignored."""
    if sync_every > 1 and not multi_worker:
        raise ConfigError(
            f"sync_every={sync_every} needs --strategy=multi_worker (other strategies all-reduce gradients every step)."
        )


def check_cpu_split(num_devices: int, strategy: str) -> None:
    """The CPU split (`--num_cpu_devices` > 1) makes MirroredStrategy's replicas; under another strategy it
    would be ignored."""
    if num_devices > 1 and strategy != "mirrored":
        raise ConfigError(
            f"num_cpu_devices={num_devices} splits the CPU into MirroredStrategy's replicas; use it with "
            f"--strategy=mirrored (--strategy={strategy} trains on one device per process)."
        )


def check_batch_split(batch_size: int, replicas: int) -> None:
    """Keras's `fit` under MirroredStrategy needs every batch to split evenly over the replicas.

    Before its first step it averages the first batch's per-replica parts elementwise
    (`keras/src/backend/tensorflow/trainer.py`, `_maybe_symbolic_build`), which fails on parts of unequal size
    ("Inputs to operation AddN ... must have the same size and shape"): the default 256 over 3 replicas did.
    The multi-worker loop (`distributed.multi_worker`) sums per-replica losses and has no such limit.
    """
    if replicas > 1 and batch_size % replicas:
        below = batch_size - batch_size % replicas
        examples = f"{below} or {below + replicas}" if below else f"{replicas}"
        raise ConfigError(
            f"batch_size={batch_size} does not split evenly over the {replicas} replicas of a mirrored strategy; "
            f"give a multiple of {replicas}, such as {examples}."
        )


def check_tf_config(environ=os.environ) -> None:
    """A TF_CONFIG for MultiWorkerMirroredStrategy, checked before TensorFlow reads it: JSON naming a cluster
    (job -> list of "host:port") and this process's task in it; absent means one local worker."""
    text = environ.get("TF_CONFIG")
    if not text:
        return
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"TF_CONFIG is not valid JSON ({e}).") from None
    cluster = spec.get("cluster") if isinstance(spec, dict) else None
    task = spec.get("task") if isinstance(spec, dict) else None
    if not isinstance(cluster, dict) or not cluster or not all(isinstance(v, list) and v for v in cluster.values()):
        raise ConfigError(
            'TF_CONFIG needs a "cluster" object of jobs, each a list of "host:port" addresses, '
            'e.g. {"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}.'
        )
    kind = task.get("type") if isinstance(task, dict) else None
    index = task.get("index") if isinstance(task, dict) else None
    if (
        kind not in cluster
        or not isinstance(index, int)
        or isinstance(index, bool)
        or not 0 <= index < len(cluster[kind])
    ):
        raise ConfigError(
            f'TF_CONFIG\'s "task" {json.dumps(task)} must name a job of its cluster ({", ".join(sorted(cluster))}) '
            "and an index within it."
        )


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into logical devices (before any op runs) for MirroredStrategy."""
    # deferred: TensorFlow loads when this runs, not with the module
    import tensorflow as tf

    check_cpu_devices(num_devices)
    if num_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)]
        )


def make_strategy(name: str, num_cpu_devices: int = 1):
    # deferred: TensorFlow loads when this runs, not with the module
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "multi_worker":  # the cluster comes from TF_CONFIG; without it, one local worker
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            # One all-reduce for all gradients instead of one per variable (benchmarks.scaling measures it).
            bytes_per_pack=32 << 20,
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")][:num_cpu_devices]
        return tf.distribute.MirroredStrategy(devices=devices)
    raise ConfigError(f"strategy={name!r} must be 'default', 'mirrored' or 'multi_worker'.")


def loopback_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1, for a local cluster (tests, benchmarks, trying it out)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def is_chief(strategy) -> bool:
    """Whether this worker writes the run directory (the chief, or worker 0 of a cluster without one)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )
