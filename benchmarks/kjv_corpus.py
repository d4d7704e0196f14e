"""The King James Bible from Debian's `bible-kjv` as a corpus kept aside: a third English text, never tuned on.

    apt-get download bible-kjv bible-kjv-text && for d in bible-kjv*.deb; do dpkg-deb -x "$d" kjv; done
    python -m benchmarks.kjv_corpus --bible=kjv/usr/bin/bible --data_path=kjv/usr/lib --output=runs/kjv
    python -m nplm_tf.train --model_dir=runs/kjv_net --corpus=files --train_files=runs/kjv/train.txt \\
        --valid_files=runs/kjv/valid.txt --test_files=runs/kjv/test.txt

The protocol (benchmarks/README.md): the text is the `bible` program's own (Genesis 1:1 to Revelation 22:21,
1,189 chapters, 31,102 verses). A verse is a line; a blank line ends each chapter (a document for `--cache`).
Tokens: runs of letters (an apostrophe inside a word kept: `LORD's`), runs of digits, and each other
character alone, case kept. Chapter i (from 0, in the book order) goes to valid when i mod 20 = 18, to test
when i mod 20 = 19, else to train. Prints one JSON line: each split's chapters, lines and tokens. Files already
in --output are left alone: the run stops instead.
"""

import json
import os
import subprocess

from absl import flags

from pipelines import app, files
from pipelines.errors import UserError
from pipelines.kjv import chapters, split_of, tokens

BIBLE = flags.DEFINE_string("bible", "bible", "The `bible` program of Debian's bible-kjv.")
DATA_PATH = app.define_path(
    "data_path", None, "The folder holding bible.data (bible-kjv-text's); default: the program's."
)
OUTPUT = app.define_path("output", None, "Directory to write train.txt, valid.txt and test.txt into.", required=True)

SPLITS = ("train", "valid", "test")


def check() -> dict[str, str]:
    paths = {s: os.path.join(OUTPUT.value, f"{s}.txt") for s in SPLITS}
    present = [p for p in paths.values() if os.path.exists(p)]
    if present:
        raise UserError(f"{present[0]} exists; give an empty --output (the corpus is written once).")
    return paths


def main(argv, paths):
    command = [BIBLE.value, *(["-p", DATA_PATH.value] if DATA_PATH.value else []), "gen1:1-rev22:21"]
    try:
        text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise UserError(f"{BIBLE.value} could not print the text ({e}); install Debian's bible-kjv.") from None
    found = chapters(text)
    if len(found) != 1189:
        raise UserError(f"{BIBLE.value} printed {len(found)} chapters, not the King James Bible's 1,189.")
    os.makedirs(OUTPUT.value, exist_ok=True)
    counts = {}
    for name in SPLITS:
        kept = [[tokens(v) for v in c] for i, c in enumerate(found) if split_of(i) == name]
        files.write_text(paths[name], "\n".join("".join(v + "\n" for v in c) for c in kept))
        counts[name] = {
            "chapters": len(kept),
            "lines": sum(len(c) for c in kept),
            "tokens": sum(len(v.split()) for c in kept for v in c),
        }
    print(json.dumps(counts))


if __name__ == "__main__":
    app.run(main, check, tensorflow=False)
