"""One shared helper for the tests: tiny corpora, tiny configs, binary runs."""

from __future__ import annotations

import os
import subprocess
import sys

from nplm_tf.config import Config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_NLTK = os.path.join(os.path.dirname(ROOT), "shared", "nltk_data")


# tiny_config's settings as flags of the binaries.
TINY_FLAGS = [
    "--order=3",
    "--feature_dim=8",
    "--hidden_dim=16",
    "--min_count=1",
    "--batch_size=16",
    "--learning_rate=0.01",
    "--lr_decay=0",
    "--weight_decay=0",
    "--precision=float32",
    "--shuffle_buffer=64",
]


def files_flags(paths: dict[str, str]) -> list[str]:
    """The corpus flags of `tiny_corpus_files`' paths."""
    return [
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ]


def tiny_config(**changes) -> Config:
    """A config small enough to train in seconds on 2 CPU cores."""
    base = dict(
        order=3,
        feature_dim=8,
        hidden_dim=16,
        min_count=1,
        epochs=2,
        batch_size=16,
        learning_rate=0.01,
        lr_decay=0.0,
        weight_decay=0.0,
        precision="float32",
        shuffle_buffer=64,
        patience=5,
        seed=7,
    )
    base.update(changes)
    return Config(**base)


def write_lines(path: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def synthetic_texts(seed: int, count: int) -> list[str]:
    """Sentences from a small grammar: enough structure to learn, no randomness in the rules."""
    import random

    rng = random.Random(seed)
    subjects = ["the cat", "the dog", "a bird", "my friend", "the teacher"]
    verbs = ["sees", "likes", "finds", "follows"]
    objects = ["the ball", "a tree", "the house", "some food"]
    return [
        " ".join(
            f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} ." for _ in range(rng.randint(2, 5))
        )
        for _ in range(count)
    ]


def tiny_corpus_files(tmp_path, train: int = 60, valid: int = 10, test: int = 10) -> dict[str, str]:
    paths = {}
    for i, (name, count) in enumerate((("train", train), ("valid", valid), ("test", test))):
        paths[name] = write_lines(os.path.join(str(tmp_path), f"{name}.txt"), synthetic_texts(i, count))
    return paths


def run_binary(module: str, *args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.setdefault("NLTK_DATA", SHARED_NLTK)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def error_lines(stderr: str) -> list[str]:
    """The binary's own error sentences (TensorFlow's start-up log lines left out)."""
    return [line for line in stderr.splitlines() if line.startswith("error: ")]
