"""The nearest words of a trained model by the cosine similarity of their feature vectors C(i).

    python -m nplm_tf.neighbors --model_dir=runs/mlp9 --words=dog,Monday,said [--k=10]
    python -m nplm_tf.neighbors --model_dir=runs/mlp9 --plot=words.png [--plot_words=300] [--projector]

--plot draws the most frequent words on the first two principal components of their features, the --words
and their --k neighbours highlighted and labelled (the others labelled where a label fits); --projector writes the features for TensorBoard's Embedding Projector into MODEL_DIR/logs/projector
(over the same files training writes there, and says so): `tensorboard --logdir=MODEL_DIR/logs`, tab "Projector".
"""

import sys

from absl import flags

from nplm_tf.core import run_dir
from nplm_tf.core.config import ConfigError
from nplm_tf.inference import embeddings
from pipelines import app, files

MODEL_DIR = app.define_path("model_dir", None, "A directory written by nplm_tf.train.", required=True)
WORDS = flags.DEFINE_list("words", [], "Words whose neighbours to print (as the vocabulary spells them).")
K = flags.DEFINE_integer("k", 10, "Neighbours per word.")
PLOT = app.define_path("plot", None, "Write a PNG of the most frequent words in two dimensions here.")
PLOT_WORDS = flags.DEFINE_integer("plot_words", 300, "Words in the picture.")
PROJECTOR = flags.DEFINE_boolean("projector", False, "Write the TensorBoard projector files into MODEL_DIR/logs.")


def words() -> list[str]:
    """--words without empty entries (`--words=a,,b`, a trailing comma)."""
    return [w for w in WORDS.value if w]


def check() -> None:
    """The flag values and that --model_dir holds a trained model, before TensorFlow loads."""
    if K.value < 1:
        raise ConfigError(f"--k={K.value} must be at least 1.")
    if PLOT_WORDS.value < 2:
        raise ConfigError(f"--plot_words={PLOT_WORDS.value} must be at least 2.")
    if not (words() or PLOT.value or PROJECTOR.value):
        raise ConfigError("nothing to do: give --words, --plot or --projector.")
    if PLOT.value:
        files.check_output_file("plot", PLOT.value)
    run_dir.check_trained(MODEL_DIR.value)


def main(argv, checked):
    vocab = run_dir.RunDir(MODEL_DIR.value).load_vocab()
    table = embeddings.features_of(MODEL_DIR.value)  # NumPy: no TensorFlow unless --projector
    index = {w: i for i, w in enumerate(vocab.words)}
    unknown = [w for w in words() if w not in index]
    asked = {}
    for word in words():
        if word in index:
            pairs = embeddings.nearest(table, index[word], K.value)
            asked[index[word]] = [i for i, _ in pairs]
            print(f"{word}:\t" + "\t".join(f"{vocab.words[i]} {cosine:.3f}" for i, cosine in pairs), flush=True)
    if PLOT.value:
        embeddings.plot(table, vocab, PLOT.value, PLOT_WORDS.value, asked)
        print(f"wrote {PLOT.value}")
    if PROJECTOR.value:
        app.import_tensorflow_quietly()
        directory = embeddings.write_projector(run_dir.RunDir(MODEL_DIR.value), vocab, table)
        print(f"wrote {directory} (over the files training wrote there: the same features, the best weights' C)")
    if unknown:
        app.fail(f"not in the model's vocabulary: {', '.join(unknown)} (the others are answered above).")
    sys.stdout.flush()


def run():
    app.run(main, check, tensorflow=False)  # TensorFlow only for --projector


if __name__ == "__main__":
    run()
