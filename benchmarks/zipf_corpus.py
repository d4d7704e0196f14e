"""A synthetic corpus with as large a vocabulary as asked, for measuring vocabularies beyond GCIDE's.

    python -m benchmarks.zipf_corpus --output=runs/zipf   # 5 M train words; |V| = 1,068,420 at --min_count=1
    python -m nplm_tf.train --model_dir=runs/zipf_sl --corpus=files --min_count=1 --shortlist=4000 \
        --train_files=runs/zipf/train.txt --valid_files=runs/zipf/valid.txt --test_files=runs/zipf/test.txt

Writes train.txt, valid.txt and test.txt in --output, --line_words words a line. Each word is drawn from a
Zipf-Mandelbrot law over --ranks ranks, P(r) ∝ (r + --offset)^-(--exponent) (r = 1, 2, ...), so that the
distinct words grow with the tokens as a natural text's do (at the defaults, 1,068,418 distinct words in
train, and 12.9% of valid's tokens, `</s>` counted, unseen in it); with probability --follow a word is instead
the fixed successor of the word written before it (rank·7 + 3 modulo --ranks), so that a context predicts
something. Words are written `w` and the rank in hex. The same flags write the same files (each split has its
own seed). Prints one JSON line: each split's tokens (words) and distinct words. Files already in --output are
left alone: the run stops instead.
"""

import json
import os

from absl import flags

from pipelines import app, files
from pipelines.errors import UserError

OUTPUT = app.define_path("output", None, "Directory to write train.txt, valid.txt and test.txt into.", required=True)
TRAIN_TOKENS = flags.DEFINE_integer("train_tokens", 5_000_000, "Words in train.")
EVAL_TOKENS = flags.DEFINE_integer("eval_tokens", 100_000, "Words in valid and in test, each.")
RANKS = flags.DEFINE_integer("ranks", 3_000_000, "Ranks of the Zipf-Mandelbrot law (the most words possible).")
EXPONENT = flags.DEFINE_float("exponent", 1.0, "The law's exponent.")
OFFSET = flags.DEFINE_float("offset", 2.7, "The law's offset (Mandelbrot's).")
FOLLOW = flags.DEFINE_float("follow", 0.3, "Probability that a word is its predecessor's fixed successor.")
LINE_WORDS = flags.DEFINE_integer("line_words", 20, "Words a line (the last line of a split may be shorter).")
SEED = flags.DEFINE_integer("seed", 0, "Seed; split i (train 1, valid 2, test 3) draws with seed + i.")

SPLITS = ("train", "valid", "test")


def check() -> dict[str, str]:
    """The flag values, and the three output paths, none of which may exist yet."""
    for flag, low in ((TRAIN_TOKENS, 1), (EVAL_TOKENS, 1), (RANKS, 2), (LINE_WORDS, 1), (SEED, 0)):
        if flag.value < low:
            raise UserError(f"--{flag.name}={flag.value} must be at least {low}.")
    if not EXPONENT.value > 0:
        raise UserError(f"--exponent={EXPONENT.value} must be positive.")
    if not OFFSET.value > -1:
        raise UserError(f"--offset={OFFSET.value} must be greater than -1 (the first rank's weight is finite).")
    if not 0 <= FOLLOW.value < 1:
        raise UserError(f"--follow={FOLLOW.value} must be in [0, 1).")
    paths = {name: os.path.join(OUTPUT.value, f"{name}.txt") for name in SPLITS}
    existing = [p for p in paths.values() if os.path.lexists(p)]
    if existing:
        raise UserError(f"{existing[0]} already exists; choose another --output or remove it.")
    if os.path.exists(OUTPUT.value) and not os.path.isdir(OUTPUT.value):
        raise UserError(f"--output={OUTPUT.value} is not a directory.")
    return paths


def draw(tokens: int, seed: int) -> list[int]:
    """The ranks (0-based) of one split's words."""
    import numpy as np

    ranks = RANKS.value
    p = 1.0 / (np.arange(1, ranks + 1) + OFFSET.value) ** EXPONENT.value
    p /= p.sum()
    rng = np.random.default_rng(seed)
    ids = rng.choice(ranks, size=tokens, p=p).tolist()
    for i in np.flatnonzero(rng.random(tokens) < FOLLOW.value).tolist():
        if i:  # the successor of the word written before it, itself perhaps a successor
            ids[i] = (ids[i - 1] * 7 + 3) % ranks
    return ids


def main(argv, paths):
    os.makedirs(OUTPUT.value, exist_ok=True)
    report = {}
    for i, name in enumerate(SPLITS, start=1):
        ids = draw(TRAIN_TOKENS.value if name == "train" else EVAL_TOKENS.value, SEED.value + i)
        words = [f"w{r:x}" for r in ids]
        step = LINE_WORDS.value
        text = "".join(" ".join(words[j : j + step]) + "\n" for j in range(0, len(words), step))
        files.write_text(paths[name], text)
        report[name] = {"path": paths[name], "tokens": len(words), "distinct": len(set(ids))}
    print(json.dumps(report))


if __name__ == "__main__":
    app.run(main, check, tensorflow=False)
