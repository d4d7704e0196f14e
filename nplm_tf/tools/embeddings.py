"""The word feature vectors C(i): nearest neighbours, a 2-D picture, and TensorBoard's Embedding Projector.

The paper's claim is that similar words get similar feature vectors, which is how the network generalizes
to word sequences it never saw; these look at that in a trained model. Rows 0..|V|-1 of C are the
predictable words (the input-only `<s>` row is left out).
"""

from __future__ import annotations

import os

import numpy as np

from nplm_tf.run_dir import RunDir
from pipelines import files
from pipelines import vocabulary as vocab_lib

PROJECTOR_RUN = "projector"  # logs/projector: its checkpoint, metadata.tsv and projector_config.pbtxt
METADATA = "metadata.tsv"


def features(model) -> np.ndarray:
    """C without the `<s>` row: (|V|, m) float32."""
    layer = model.get_layer("nplm")
    return np.asarray(layer.C.numpy()[: layer.vocab_size], np.float32)


def nearest(table: np.ndarray, word_id: int, k: int) -> list[tuple[int, float]]:
    """The k ids whose rows have the highest cosine similarity with `word_id`'s (itself left out; all the
    others when k is at least |V| - 1)."""
    norms = np.linalg.norm(table, axis=1)
    cosine = table @ table[word_id] / np.maximum(norms * norms[word_id], 1e-12)
    order = np.argsort(-cosine, kind="stable")
    best = order[order != word_id][:k]
    return [(int(i), float(cosine[i])) for i in best]


def plot(table: np.ndarray, vocab: vocab_lib.Vocabulary, path: str, count: int) -> None:
    """The `count` most frequent words (</s> and <unk> left out) projected on their first two principal axes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    ids = np.arange(2, min(vocab.size, count + 2))
    points = table[ids] - table[ids].mean(axis=0)
    _, _, axes = np.linalg.svd(points, full_matrices=False)
    xy = points @ axes[:2].T  # (count, 2)
    fig, ax = plt.subplots(figsize=(14, 11), dpi=100)
    ax.scatter(xy[:, 0], xy[:, 1], s=4, color="tab:blue", alpha=0.5)
    for (x, y), i in zip(xy, ids):
        ax.annotate(vocab.words[i], (x, y), fontsize=7, alpha=0.85, xytext=(2, 2), textcoords="offset points")
    ax.set_title(f"word features C(i) of the {len(ids)} most frequent words, first two principal components")
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
    fig.tight_layout()
    files.replace_atomically(path, fig.savefig)
    plt.close(fig)


def write_projector(run: RunDir, vocab: vocab_lib.Vocabulary, table: np.ndarray) -> str:
    """MODEL_DIR/logs/projector: C as a checkpoint, metadata.tsv (word, train count) and the projector config."""
    import tensorflow as tf
    from tensorboard.plugins import projector

    directory = os.path.join(run.logs_dir, PROJECTOR_RUN)
    os.makedirs(directory, exist_ok=True)
    rows = "".join(f"{_cell(word)}\t{count}\n" for word, count in zip(vocab.words, vocab.counts))
    files.write_text(os.path.join(directory, METADATA), "word\tcount\n" + rows)
    checkpoint = tf.train.Checkpoint(embedding=tf.Variable(table, name="word_features"))
    # save(), not write(): the projector finds the checkpoint through the `checkpoint` file save() keeps.
    checkpoint.save(os.path.join(directory, "word_features.ckpt"))
    config = projector.ProjectorConfig()
    embedding = config.embeddings.add()
    embedding.tensor_name = "embedding/.ATTRIBUTES/VARIABLE_VALUE"
    embedding.metadata_path = METADATA
    projector.visualize_embeddings(directory, config)
    # TensorBoard lists a directory as a run (and so its projector) only when it holds an event file.
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default():
        tf.summary.text("word_features", f"C: {table.shape[0]} words x {table.shape[1]} features", step=0)
    writer.close()
    return directory


def _cell(word: str) -> str:
    return word.replace("\t", " ")
