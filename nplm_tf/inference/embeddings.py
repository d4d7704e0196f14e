"""The word feature vectors C(i): nearest neighbours, a 2-D picture, and TensorBoard's Embedding Projector.

The paper's claim is that similar words get similar feature vectors, which is how the network generalizes
to word sequences it never saw; these look at that in a trained model. Rows 0..|V|-1 of C are the
predictable words (the input-only `<s>` row is left out).
"""

from __future__ import annotations

import os

import numpy as np

from nplm_tf.core.run_dir import RunDir
from nplm_tf.inference.network import read_weights
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


def features_of(model_dir: str) -> np.ndarray:
    """C without the `<s>` row, (|V|, m) float32, read from a run's best weights without TensorFlow."""
    run = RunDir(model_dir)
    vocab_size = run.load_vocab().size
    return read_weights(run.best_weights, run.read_config(), vocab_size, rows=False)["C"][:vocab_size]  # C alone


def plot(
    table: np.ndarray,
    vocab: vocab_lib.Vocabulary,
    path: str,
    count: int,
    asked: dict[int, list[int]] | None = None,
) -> dict[int, tuple[float, float, float, float]]:
    """The `count` most frequent words (</s> and <unk> left out) projected on their first two principal axes,
    with `asked` (word id -> its neighbours' ids) drawn on top: each asked word and its neighbours in a colour
    of their own, every one labelled. The other words are labelled only where a label overlaps no other
    (the most frequent first), so the picture stays readable at any `count`. Returns each labelled word's
    label box (x0, y0, x1, y1) in the figure's pixels."""
    # deferred: matplotlib loads when this runs, not with the module
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib loads when this runs, not with the module
    from matplotlib import pyplot as plt

    asked = asked or {}
    background = np.arange(2, min(vocab.size, count + 2))
    highlighted = [i for word, near in asked.items() for i in (word, *near)]
    ids = np.array(list(dict.fromkeys([*background.tolist(), *highlighted])), np.int64)
    points = table[ids] - table[ids].mean(axis=0)
    _, _, axes = np.linalg.svd(points, full_matrices=False)
    xy = dict(zip(ids.tolist(), points @ axes[:2].T))  # id -> (x, y)
    fig, ax = plt.subplots(figsize=(14, 11), dpi=100)
    back = np.array([xy[i] for i in background.tolist()])
    ax.scatter(back[:, 0], back[:, 1], s=5, color="0.6", alpha=0.6, zorder=1)
    colours = plt.get_cmap("tab10")
    for n, (word, near) in enumerate(asked.items()):
        group = np.array([xy[i] for i in (word, *near)])
        ax.scatter(group[1:, 0], group[1:, 1], s=22, color=colours(n % 10), zorder=3)
        ax.scatter(
            group[:1, 0], group[:1, 1], s=90, color=colours(n % 10), marker="*", zorder=4, label=vocab.words[word]
        )
    ax.autoscale_view()
    fig.canvas.draw()  # the limits and the renderer that label extents are measured with
    renderer = fig.canvas.get_renderer()
    placed = []  # the label boxes drawn so far, in display coordinates
    boxes = {}

    def label(i, must: bool, **style) -> None:
        """Writes word i's label at the first offset where it overlaps no label drawn so far; one that `must`
        show goes, failing that, where it overlaps least (farther out, with a line to its point)."""
        best = None
        for dx, dy in _LABEL_OFFSETS if must else _LABEL_OFFSETS[:4]:
            ha, va = ("left" if dx >= 0 else "right"), ("bottom" if dy >= 0 else "top")
            text = ax.annotate(
                vocab.words[i], xy[i], xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **style
            )
            box = text.get_window_extent(renderer).expanded(1.04, 1.08)
            inside = fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
            overlap = sum(_overlap_area(box, other) for other in placed) + (0 if inside else 1e9)
            if overlap == 0:
                placed.append(box)
                boxes[i] = tuple(text.get_window_extent(renderer).extents)
                return
            text.remove()
            if best is None or overlap < best[0]:
                best = (overlap, dx, dy, ha, va)
        if must and best is not None:
            _, dx, dy, ha, va = best
            text = ax.annotate(
                vocab.words[i],
                xy[i],
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va=va,
                arrowprops={"arrowstyle": "-", "color": style["color"], "lw": 0.5},
                **style,
            )
            placed.append(text.get_window_extent(renderer))
            boxes[i] = tuple(placed[-1].extents)

    for n, (word, near) in enumerate(asked.items()):  # the asked words first, then their neighbours
        label(word, True, fontsize=10, weight="bold", color=colours(n % 10), zorder=6)
    for n, (word, near) in enumerate(asked.items()):
        for i in near:
            label(i, True, fontsize=9, color=colours(n % 10), zorder=5)
    shown = set(highlighted)
    for i in background.tolist():  # most frequent first, where a label fits
        if i not in shown:
            label(i, False, fontsize=7, color="0.3", zorder=2)
    what = f"the {len(background)} most frequent words"
    if asked:
        what += " (grey) and " + ", ".join(vocab.words[w] for w in asked) + " with their nearest words"
        ax.legend(loc="best", fontsize=9, title="asked", title_fontsize=9)
    ax.set_title(f"word features C(i): {what}, on their first two principal components", fontsize=10)
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
    fig.tight_layout()
    files.replace_atomically(path, fig.savefig)
    plt.close(fig)
    return boxes


# Where a label may go, in points from its word's point: the four corners close by, then farther out.
_LABEL_OFFSETS = [
    (3, 3),
    (-3, 3),
    (3, -3),
    (-3, -3),
    (0, 12),
    (0, -12),
    (14, 0),
    (-14, 0),
    (12, 14),
    (-12, 14),
    (12, -14),
    (-12, -14),
    (0, 24),
    (0, -24),
    (26, 0),
    (-26, 0),
]


def _overlap_area(a, b) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width * height if width > 0 and height > 0 else 0.0


def write_projector(run: RunDir, vocab: vocab_lib.Vocabulary, table: np.ndarray) -> str:
    """MODEL_DIR/logs/projector: C as a checkpoint, metadata.tsv (word, train count) and the projector config."""
    # deferred: TensorFlow and TensorBoard loads when this runs, not with the module
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
