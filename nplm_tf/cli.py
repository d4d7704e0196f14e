"""What every binary shares: one clear sentence and a non-zero exit on bad input."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable

# Quieter TensorFlow start-up; set before tensorflow is imported by a binary.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402

from nplm_tf.config import ConfigError  # noqa: E402
from pipelines.corpus import CorpusError  # noqa: E402

USER_ERRORS = (ConfigError, CorpusError, FileNotFoundError)


def fail(message: str, code: int = 1) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def guarded(main: Callable[[list[str]], None]) -> Callable[[list[str]], None]:
    """Wraps `main`: user errors print one sentence; Ctrl-C says how to resume."""

    def wrapped(argv: list[str]) -> None:
        from absl import flags, logging

        if not flags.FLAGS["verbosity"].present:  # TensorFlow's INFO chatter (savers, collectives) off
            logging.set_verbosity(logging.WARNING)
        if len(argv) > 1:
            fail(f"unexpected arguments {argv[1:]}; every option is a --flag.", 2)
        try:
            main(argv)
        except USER_ERRORS as e:
            fail(str(e))
        except KeyboardInterrupt:
            fail("interrupted; run the same command again to resume from the last finished epoch.", 130)

    return wrapped


def run(main: Callable[[list[str]], None]) -> None:
    import logging

    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # per-batch distribute chatter
    app.run(guarded(main))


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into logical devices (before any op runs) for MirroredStrategy."""
    import tensorflow as tf

    if num_devices < 1:
        raise ConfigError(f"num_cpu_devices={num_devices} must be at least 1.")
    if num_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)]
        )


def make_strategy(name: str, num_cpu_devices: int = 1):
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "multi_worker":  # the cluster comes from TF_CONFIG; without it, one local worker
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            # One all-reduce for all gradients instead of one per variable: +17% on 2 workers (benchmarks.scaling).
            bytes_per_pack=32 << 20)
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
