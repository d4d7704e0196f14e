"""What `nplm_tf.LanguageModel` scores with: one interface over the models a path can hold.

A source has a vocabulary, an order, and for a list of contexts (each the last order − 1 token ids, −1 for
nothing, `<s>` = |V|) one cache entry each: (row, offset), where offset None means row is P(· | context) in
float64; a float means row is a full softmax's float32 outputs y and offset their ln normalizer; `RAW` means
row is a network's hidden layer, each word's score one dot product with it. `open_source` asks each kind
whether it reads the path (`reads`, by the files there), so a new kind is one class in `KINDS`.
"""

from __future__ import annotations

import json
import os

import numpy as np

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import mixture as mixture_lib
from nplm_tf.core import run_dir
from nplm_tf.inference import nplm_format
from nplm_tf.inference.network import NumpyNetwork
from nplm_tf.tools import ensemble
from nplm_tf.tools import lines as lines_lib
from pipelines import app
from pipelines import vocabulary as vocab_lib
from pipelines.errors import UserError

NOTHING = -1  # a state's position before the sentence (or after a null context)
RAW = "raw"  # an entry's marker: (hidden layer, RAW) of a network scored by its raw outputs


class Source:
    """One kind of model behind `LanguageModel`: `vocab`, `order`, `entries` and `length`."""

    what = "a model"  # how a refusal names it
    network: NumpyNetwork | None = None  # a model directory's network, mixed or not (raw scoring reads it)
    ngram = None  # the n-gram whose context counts choose the mixture's weights, if any

    @classmethod
    def reads(cls, path: str) -> bool:
        raise NotImplementedError

    def entries(self, contexts: list[tuple[int, ...]]) -> list:
        """Each context's (row, offset) entry (the module's docstring)."""
        raise NotImplementedError

    def ranked(self, context: tuple[int, ...], k: int):
        """(P (k,), ids (k,)) of the k most probable next words by the model's own ranking, or None: rank the
        whole next-word distribution."""
        return None

    def drawn(self, context: tuple[int, ...], seed, banned: int | None):
        """A next word drawn by the model's own sampler, or None: draw from the whole distribution."""
        return None

    def length(self, known: list[int], word: int) -> int:
        """The context's words used and the word: a network's min(position + 1, order) (the words before it in
        the sentence, `<s>` not counted, as `nplm_tf.query` prints it)."""
        return min(sum(w != self.vocab.size for w in known) + 1, self.order)

    def network_rows(self, network: NumpyNetwork, contexts: list[tuple[int, ...]]) -> np.ndarray:
        """The network's last n − 1 words of each context, `<s>`-padded, (rows, n − 1)."""
        c, bos = network.context_size, self.vocab.size
        rows = np.array([[bos if w == NOTHING else w for w in ctx[len(ctx) - c :]] for ctx in contexts])
        return rows.reshape(len(contexts), c)

    def context_weights(self, table: np.ndarray, contexts: list[tuple[int, ...]]) -> np.ndarray:
        """The members' weights for each context (`mixture.context_weights` of `table`, (buckets, members)), by
        the train count of the n-gram's full context, as `KneserNey.context_counts` files a token (0 when
        shorter, nearer the line's start)."""
        if self.ngram is None or len(table) == 1:
            return mixture_lib.context_weights(table)
        k = self.ngram.order - 1
        counts = np.zeros(len(contexts))
        for r, context in enumerate(contexts):
            words = [w for w in context if w != NOTHING][-k:] if k else []
            if k == 0:
                counts[r] = self._totals[0]
            elif len(words) == k:
                g = self.ngram.context_id(words)
                counts[r] = self._totals[g] if g >= 0 else 0.0
        return mixture_lib.context_weights(table, counts)

    def use_ngram(self, ngram) -> None:
        self.ngram, self._totals = ngram, ngram.context_totals()


def ngram_distribution(ngram, contexts: list[tuple[int, ...]]) -> np.ndarray:
    """P(· | context) of each context under an n-gram, (rows, |V|) float64."""
    return np.stack([ngram.distribution([w for w in ctx if w != NOTHING]) for ctx in contexts])


class NgramSource(Source):
    """An n-gram directory (`nplm_tf.ngram`)."""

    what = "an n-gram directory"

    @classmethod
    def reads(cls, path: str) -> bool:
        return os.path.isfile(os.path.join(path, run_dir.NGRAM_MODEL))

    def __init__(self, path: str, **_):
        self.vocab = run_dir.RunDir(path).load_vocab()
        self.ngram = ngram_lib.load(path)
        self.order = self.ngram.order

    def entries(self, contexts):
        return [(row, None) for row in ngram_distribution(self.ngram, contexts)]

    def length(self, known: list[int], word: int) -> int:
        """The length of the longest n-gram (a suffix of the context, then the word) the model holds, as KenLM's."""
        ngram, best = self.ngram, 1
        for k in range(2, min(len(known) + 1, ngram.order) + 1):
            h = ngram.context_id(known[-(k - 1) :])
            if h < 0:
                break
            if ngram.orders[k].lookup(np.array([h * ngram.base + word]))[0] >= 0:
                best = k
        return best


class NetworkSource(Source):
    """A model directory (`nplm_tf.train`): the network, with the mixture its directory keeps (`mixture`) or with
    `ngram_dir`; `normalized=False` scores a lone network by its raw outputs."""

    what = "a network"

    @classmethod
    def reads(cls, path: str) -> bool:
        return os.path.isfile(os.path.join(path, run_dir.CONFIG))

    def __init__(self, path: str, mixture: bool = True, ngram_dir: str | None = None, normalized: bool = True):
        self.network = NumpyNetwork.load(path)
        self.vocab = run_dir.RunDir(path).load_vocab()
        chosen = ngram_dir or (lines_lib.saved_mixture_ngram(path) if mixture else None)
        if chosen:
            scorer = lines_lib.LineScorer(path, chosen, "mixture", network=self.network)  # its fit
            self.use_ngram(scorer.ngram)
            self.weights, self.what = mixture_lib.pair_table(scorer.weights), "a mixture"
        self.order = max(self.network.order, self.ngram.order if self.ngram is not None else 0)
        self.raw = not normalized
        if self.raw:
            self._check_raw(path)

    def entries(self, contexts):
        rows = self.network_rows(self.network, contexts)
        if self.raw:  # the hidden layer only: each word's raw score is one dot product with it
            return [(self.network.raw_hidden(row), RAW) for row in rows]
        unnormalized = self.network.unnormalized(rows) if self.ngram is None else None
        if unnormalized is not None:  # the full softmax: keep y (float32) and ln Z, not P
            y, offsets = unnormalized
            return list(zip(y, offsets.tolist()))
        p = self.network.distribution(rows)
        if self.ngram is not None:
            p = mixture_lib.mix(
                [p, ngram_distribution(self.ngram, contexts)], self.context_weights(self.weights, contexts)
            )
        return [(row, None) for row in p]

    def ranked(self, context, k):
        if self.raw or self.ngram is not None:
            return None
        p, ids = self.network.top_k(self.network_rows(self.network, [context]), k)  # the head's own
        return p[0], ids[0]

    def drawn(self, context, seed, banned):
        if self.raw or self.ngram is not None or (banned is not None and not self.network.head.can_ban(banned)):
            return None
        return int(self.network.sample(self.network_rows(self.network, [context]), seed, banned)[0])

    def _check_raw(self, path: str) -> None:
        """`normalized=False`'s conditions, each refused in one sentence: a network alone, a full softmax without
        direct connections, and ln Z on valid near 0 (metrics.json's, else measured on 2,000 valid contexts)."""
        if self.ngram is not None:
            refuse_raw(path, self.what)
        why = nplm_format.refusal(self.network.config, self.network.head)  # the networks nplm and Moses score raw
        if why:
            raise UserError(
                "normalized=False needs a full softmax with a hidden layer and no direct connections (a network "
                f"nplm scores raw); {path} cannot be scored so: {why}"
            )
        stats = (run_dir.RunDir(path).read_metrics() or {}).get("valid_log_normalizer")
        if stats is None:  # a model trained before metrics.json reported it
            measured = nplm_format.log_normalizer_stats(path)
            stats = {"mean": measured["mean"], "std": measured["sd"]}
        if nplm_format.wide(stats["mean"], stats["std"]):
            raise UserError(
                f"{path}'s raw outputs are not log-probabilities: ln Z on valid has mean {stats['mean']:.2f} and sd "
                f"{stats['std']:.2f}; train it with --self_normalize=0.1 (or --loss=nce), or score it normalized."
            )


class EnsembleSource(Source):
    """An ensemble's fit (`evaluate --model_dirs … --save_ensemble=FILE`): its members and their weights, per
    context frequency with an n-gram among them, else one set fitted by EM."""

    what = "an ensemble"

    @classmethod
    def reads(cls, path: str) -> bool:
        return os.path.isfile(path) and path.endswith(".json")

    def __init__(self, path: str, **_):
        fit, self.weights = ensemble.read_fit(path)  # (buckets or 1, members)
        self.members = ensemble.Members.load(fit["model_dirs"], fit["ngram_dirs"])  # one vocabulary, checked
        self.vocab = self.members.vocab
        if self.members.ngrams:
            self.use_ngram(self.members.ngrams[0])  # the buckets read its context counts, as the fit's did
        self.order = max([n.order for n in self.members.networks] + [n.order for n in self.members.ngrams])

    def entries(self, contexts):
        """Σ_i λ_i(C) P_i(· | C) for each context."""
        parts = [net.distribution(self.network_rows(net, contexts)) for net in self.members.networks]
        parts += [ngram_distribution(ngram, contexts) for ngram in self.members.ngrams]
        return [(row, None) for row in mixture_lib.mix(parts, self.context_weights(self.weights, contexts))]


class ExportSource(Source):
    """A SavedModel read on its own (no model directory around it): its vocabulary (an asset) and its
    `next_word` over every word, through TensorFlow."""

    what = "an export"

    @classmethod
    def reads(cls, path: str) -> bool:
        return os.path.isfile(os.path.join(path, "saved_model.pb"))

    def __init__(self, path: str, **_):
        info_path = os.path.join(path, "assets", "export.json")
        if not os.path.isfile(info_path):
            raise UserError(f"{path} is a SavedModel without nplm_tf's export.json; export it with nplm_tf.export.")
        with open(info_path, encoding="utf-8") as f:
            info = json.load(f)
        self.vocab = vocab_lib.Vocabulary.load(os.path.join(path, "assets", "vocab.tsv"))
        config, mixture = info["config"], info.get("mixture")
        order = int(config["order"]) if not mixture else max(int(config["order"]), int(mixture["ngram_order"]))
        self.order = int(info.get("order", order))  # an ensemble's: the longest its members read
        app.import_tensorflow_quietly()
        # deferred: TensorFlow loads when this runs, not with the module
        import tensorflow as tf

        self._next_word = tf.saved_model.load(path).signatures["next_word"]

    def entries(self, contexts):
        # deferred: TensorFlow loads when this runs, not with the module
        import tensorflow as tf

        words = self.vocab.words
        texts = [" ".join(words[w] for w in ctx if 0 <= w < self.vocab.size) for ctx in contexts]
        out = self._next_word(text=tf.constant(texts), k=tf.constant(self.vocab.size))
        p = np.zeros((len(contexts), self.vocab.size))
        np.put_along_axis(p, out["ids"].numpy().astype(np.int64), out["probabilities"].numpy().astype(np.float64), 1)
        return [(row, None) for row in p]


KINDS = (EnsembleSource, NetworkSource, NgramSource, ExportSource)  # asked in this order


def refuse_raw(path: str, what: str) -> None:
    raise UserError(
        f"normalized=False scores a network's raw outputs; {path} is {what}: give a network's model directory "
        "(mixture=False for one that keeps a mixture)."
    )


def open_source(path: str, mixture: bool = True, ngram_dir: str | None = None, normalized: bool = True) -> Source:
    """The source `path` holds. MODEL_DIR/export/<v> is read from its model directory, and an export's own copy of
    its network (`run_dir.EXPORT_NETWORK`) in NumPy, wherever the export lies."""
    parent = export_parent(path)
    if parent is not None:
        path = parent
    elif os.path.isfile(os.path.join(path, run_dir.EXPORT_NETWORK, run_dir.CONFIG)):
        path = os.path.join(path, run_dir.EXPORT_NETWORK)
    for kind in KINDS:
        if kind.reads(path):
            if not normalized and kind is not NetworkSource:
                refuse_raw(path, kind.what)
            return kind(path, mixture=mixture, ngram_dir=ngram_dir, normalized=normalized)
    raise UserError(
        f"{path} is no model: give a model directory (nplm_tf.train), an n-gram directory (nplm_tf.ngram) or a "
        "SavedModel export."
    )


def export_parent(path: str) -> str | None:
    """The model directory of MODEL_DIR/export/<version>, when `path` is one (read without TensorFlow)."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    is_export = os.path.isfile(os.path.join(path, "saved_model.pb"))
    if is_export and os.path.basename(os.path.dirname(os.path.abspath(path))) == run_dir.EXPORT:
        if os.path.isfile(os.path.join(parent, run_dir.CONFIG)):
            return parent
    return None
