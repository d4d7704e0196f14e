"""The USC/ISI nplm toolkit's model file: written from a model directory, read to score text.

The nplm toolkit (github moses-smt/nplm, `src/model.cpp`) and the Moses decoder's `NeuralLM` feature read a
plain-text file of sections, each ended by a blank line, every matrix a row per line, tab-separated:

    \\config             version 1, ngram_size n, input_vocab_size, output_vocab_size,
                        input_embedding_dimension m, num_hidden 0, output_embedding_dimension h,
                        activation_function tanh
    \\input_vocab        one word a line (the rows of C)
    \\output_vocab       one word a line (the rows of U and b)
    \\input_embeddings   C, input vocab × m
    \\hidden_weights 1   H, h × (n-1)·m, the context's blocks oldest word first
    \\hidden_biases 1    d, h × 1
    \\hidden_weights 2   1 × 1, the placeholder nplm reads with num_hidden 0
    \\hidden_biases 2    1 × 1
    \\output_weights     U, output vocab × h
    \\output_biases      b, output vocab × 1
    \\end

so that P(w | context) = softmax(b + U·tanh(d + H·x)), x the context's features oldest first: equation (1)
without direct connections. This project's x is newest first (`NumpyNetwork.hidden`), so H's column blocks are
written reversed. Our `<s>` (the input-only padding row), `</s>` and `<unk>` are nplm's words of the same
names; nplm's `<null>` (its padding of a context cut short) is given `<s>`'s features.

The words are written in the order every nplm route numbers them alike: `<unk>` first, then `</s>` and the
other words, then the input-only `<s>` and `<null>`. A model file's own vocabulary is read in the file's order
(`testNeuralLM`, Moses), but `prepareNeuralLM --words_file` numbers the words after a `<unk>` its vocabulary
always holds at id 0, and `testNeuralNetwork` then reads those ids as rows of the model: only with `<unk>` at 0
and the output words first do both routes give every word the model's row. (The project's own ids put `</s>`
at 0 and `<unk>` at 1, so C's, U's and b's first two rows are swapped.) `NplmModel` reads words by name, so
files in any order, nplm's own (`<unk>`, `<s>`, `</s>`, `<null>`, ...) included, score alike.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from nplm_tf import engines
from nplm_tf.core import run_dir as run_dir_lib
from nplm_tf.inference import network
from nplm_tf.network import forward, heads
from pipelines import corpora, files
from pipelines import corpus as corpus_lib
from pipelines import vocabulary as vocab_lib
from pipelines.errors import UserError

NULL = "<null>"
DIGITS = 9  # significant digits: every float32 weight survives the text round trip exactly
SECTIONS = (
    "input_embeddings",
    "hidden_weights 1",
    "hidden_biases 1",
    "hidden_weights 2",
    "hidden_biases 2",
    "output_weights",
    "output_biases",
)


class NplmFormatError(UserError):
    """A model the nplm format cannot hold, or a file that is not an nplm model this project can score."""


def refusal(config, head) -> str | None:
    """Why the nplm format cannot hold a model of `config` with `head` (its `heads.Head`, or the class
    `heads.kind` gives) (one sentence naming what to drop), or None."""
    if config.direct:
        return "it has direct connections (W), which the nplm format cannot hold; train it with --nodirect."
    if config.hidden_dim == 0:
        return "it has no hidden layer (hidden_dim=0), which the nplm format cannot hold; train it with one."
    if config.shortlist:
        return (
            f"it is a short list with a {config.tail} tail, which the nplm format cannot hold (its output is one "
            "softmax over every word); train it without --shortlist."
        )
    return head.nplm_refusal


def write(model_dir: str, path: str) -> dict:
    """Writes the network of `model_dir` (its best weights) as an nplm model file at `path` (never over an
    existing file); returns its sizes."""
    if os.path.exists(path):
        raise NplmFormatError(f"--export_dir={path} exists; the nplm model is a new file: give another name.")
    run = run_dir_lib.check_trained(model_dir)
    config, vocab = run.read_config(), run.load_vocab()
    head = heads.make(config, vocab.size)  # its network alone: a head with a tail n-gram is refused
    why = refusal(config, head)
    if why:
        raise NplmFormatError(f"{model_dir} cannot be written in the nplm format: {why}")
    w = network.read_weights(run.best_weights, config, vocab.size, head.stores_rows)
    c, m = config.context_size, config.feature_dim
    hidden = w["H"].T  # (h, c·m): block j holds the features of the j-th newest word
    hidden = np.concatenate([hidden[:, (c - 1 - j) * m : (c - j) * m] for j in range(c)], axis=1)  # oldest first
    order = nplm_order(vocab)
    output_words = [vocab.words[i] for i in order]
    input_words = output_words + [vocab_lib.BOS, NULL]
    embeddings = w["C"][order + [vocab.bos_id, vocab.bos_id]]  # <null> as <s>
    with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\\config\nversion 1\n")
        f.write(f"ngram_size {config.order}\ninput_vocab_size {len(input_words)}\noutput_vocab_size {vocab.size}\n")
        f.write(f"input_embedding_dimension {m}\nnum_hidden 0\noutput_embedding_dimension {config.hidden_dim}\n")
        f.write("activation_function tanh\n\n")
        f.write("\\input_vocab\n" + "".join(f"{word}\n" for word in input_words) + "\n")
        f.write("\\output_vocab\n" + "".join(f"{word}\n" for word in output_words) + "\n")
        zero = np.zeros((1, 1))
        matrices = [embeddings, hidden, w["d"][:, None], zero, zero, w["U"].T[order], w["b"][order, None]]
        for name, matrix in zip(SECTIONS, matrices, strict=True):
            f.write(f"\\{name}\n")
            np.savetxt(f, np.asarray(matrix, np.float32), fmt=f"%.{DIGITS}g", delimiter="\t")
            f.write("\n")
        f.write("\\end\n")
    return {"ngram_size": config.order, "input_vocab_size": len(input_words), "output_vocab_size": vocab.size}


def nplm_order(vocab: vocab_lib.Vocabulary) -> list[int]:
    """The model's ids in the order the file lists its words: `<unk>` first, then the others as they are."""
    return [vocab.unk_id] + [i for i in range(vocab.size) if i != vocab.unk_id]


@dataclasses.dataclass
class NplmModel:
    """An nplm model file read back: one tanh hidden layer (num_hidden 0), scored in NumPy."""

    order: int
    input_words: list[str]
    output_words: list[str]
    C: np.ndarray
    H: np.ndarray  # (h, (n-1)·m), blocks oldest word first
    d: np.ndarray
    U: np.ndarray  # (output vocab, h)
    b: np.ndarray

    @classmethod
    def read(cls, path: str) -> NplmModel:
        try:
            with open(path, encoding="utf-8") as f:
                return cls._parse(path, f)
        except UnicodeDecodeError:
            raise NplmFormatError(f"{path} is not UTF-8 text; give an nplm model file.") from None
        except OSError as e:
            raise NplmFormatError(f"{path} cannot be read ({e.strerror}); give an nplm model file.") from None

    @classmethod
    def _parse(cls, path: str, f) -> NplmModel:
        config, words, matrices = {}, {}, {}
        line = f.readline()
        while line:
            name = line.strip()
            if name == "\\config":
                for row in iter(f.readline, ""):
                    if not row.strip():
                        break
                    key, _, value = row.strip().partition(" ")
                    config[key] = value.strip()
            elif name in ("\\vocab", "\\input_vocab", "\\output_vocab"):
                block = []
                for row in iter(f.readline, ""):
                    if not row.strip():
                        break
                    block.append(row.strip())
                words[name[1:]] = block
            elif name[1:] in SECTIONS:
                rows = []
                for row in iter(f.readline, ""):
                    if not row.strip():
                        break
                    rows.append(row)
                try:
                    matrices[name[1:]] = np.loadtxt(rows, dtype=np.float64, ndmin=2)
                except ValueError:
                    raise NplmFormatError(f"{path}: the {name} section is not a matrix of numbers.") from None
            elif name == "\\end":
                break
            line = f.readline()
        if not config:
            raise NplmFormatError(f"{path} is not an nplm model file: it has no \\config section.")
        if config.get("version") != "1":
            raise NplmFormatError(f"{path} is nplm format version {config.get('version')}; only version 1 is read.")
        activation, hidden = config.get("activation_function", "rectifier"), config.get("num_hidden", "")
        if hidden != "0" or activation != "tanh":
            raise NplmFormatError(
                f"{path} has num_hidden {hidden} and activation {activation}; equation (1) is one tanh hidden layer "
                "(num_hidden 0, activation_function tanh), so only such models are read."
            )
        if "vocab" in words:
            words.setdefault("input_vocab", words["vocab"])
            words.setdefault("output_vocab", words["vocab"])
        missing = [s for s in ("input_vocab", "output_vocab", *SECTIONS) if s not in words and s not in matrices]
        if missing:
            raise NplmFormatError(f"{path} has no \\{missing[0]} section; it is not a whole nplm model file.")
        model = cls(
            int(config["ngram_size"]),
            words["input_vocab"],
            words["output_vocab"],
            matrices["input_embeddings"],
            matrices["hidden_weights 1"],
            matrices["hidden_biases 1"][:, 0],
            matrices["output_weights"],
            matrices["output_biases"][:, 0],
        )
        if model.H.shape[1] != (model.order - 1) * model.C.shape[1] or model.U.shape[0] != len(model.output_words):
            raise NplmFormatError(f"{path}: its matrices' sizes disagree with its \\config and vocabularies.")
        for special in (vocab_lib.BOS, vocab_lib.UNK):
            if special not in model.input_words:
                raise NplmFormatError(f"{path}: its input vocabulary has no {special}, which scoring text needs.")
        for special in (vocab_lib.EOS, vocab_lib.UNK):
            if special not in model.output_words:
                raise NplmFormatError(f"{path}: its output vocabulary has no {special}, which scoring text needs.")
        return model

    def line_log_probs(self, lines: list[list[str]]) -> tuple[np.ndarray, list[str], int]:
        """ln P of every predicted token of the token lines (each word, then `</s>`), normalized over the output
        vocabulary, as nplm's testNeuralNetwork computes it; the tokens as the output vocabulary sees them, and
        how many were unknown to it."""
        index_in = {w: i for i, w in enumerate(self.input_words)}
        index_out = {w: i for i, w in enumerate(self.output_words)}
        unk_in, unk_out, bos = index_in[vocab_lib.UNK], index_out[vocab_lib.UNK], index_in[vocab_lib.BOS]
        c, m, numpy = self.order - 1, self.C.shape[1], engines.NUMPY
        flat = np.array([index_in.get(t, unk_in) for tokens in lines for t in tokens], np.int64)
        lengths = np.array([len(tokens) for tokens in lines], np.int64)
        # the windows of the input vocabulary; the `</s>` each line ends with is a target only (id 0 in its place)
        contexts = forward.windows(flat, lengths, c, bos, 0, numpy)[:, :c]
        targets = np.array([index_out.get(t, unk_out) for tokens in lines for t in (*tokens, vocab_lib.EOS)], np.int64)
        # equation (1) as this project computes it: x newest word first, so H's blocks (nplm's oldest first) reversed
        h = self.H.T.reshape(c, m, -1)[::-1].reshape(c * m, -1)
        softmax = heads.named("softmax", 0, len(self.output_words))
        out = np.empty(targets.size)
        for lo in range(0, targets.size, 1024):
            x = forward.word_features(self.C, contexts[lo : lo + 1024], numpy)
            (hidden,) = forward.output_layer_inputs(x, h, self.d, direct=False, engine=numpy)
            out[lo : lo + 1024] = softmax.log_prob(hidden @ self.U.T + self.b, None, targets[lo : lo + 1024], numpy)
        seen = [self.output_words[t] for t in targets]
        unknown = sum(1 for tokens in lines for t in tokens if t not in index_out)
        return out, seen, unknown


WIDE_LN_Z = 0.5  # nats: a mean or spread of ln Z beyond this makes raw scores (Moses's, `normalized=False`) misleading


def wide(mean: float, sd: float) -> bool:
    """Whether ln Z's mean and standard deviation are too far from 0 for the raw outputs to stand in for
    log-probabilities."""
    return abs(mean) > WIDE_LN_Z or sd > WIDE_LN_Z


def log_normalizer_stats(model_dir: str, contexts: int = 2000) -> dict:
    """ln Z = ln Σ_w exp(y_w) of the network of `model_dir` over the first `contexts` predicted tokens of its
    corpus's valid split: its mean and standard deviation (0 and 0 for a self-normalized network)."""
    run = run_dir_lib.RunDir(model_dir)
    vocab = run.load_vocab()
    net = network.NumpyNetwork.load(model_dir)
    corpus = corpora.corpus_from_spec(run.read_corpus() or {"corpus": "brown"})
    lines, total = [], 0
    for line in corpus["valid"].iter_lines():
        tokens = corpus_lib.tokenize(line)
        if tokens:
            lines.append(vocab.ids(tokens))
            total += len(tokens) + 1
            if total >= contexts:
                break
    context, _ = net.windows(lines)
    ln_z = engines.NUMPY.log_normalizer(net.logits(net.hidden(context[:contexts])))
    return {"contexts": int(ln_z.size), "mean": float(ln_z.mean()), "sd": float(ln_z.std())}
