"""The serving graph: raw UTF-8 text in, next words, scores and generated text out.

Tokenization is training's (`tf.strings.split` on whitespace, then the
vocabulary table; unknown words are `<unk>`), context padding is training's
(`<s>` before the first word) and the network is the trained Keras model
itself, so served probabilities are `nplm_tf.evaluate`'s. Only core
TensorFlow ops are used: the SavedModel loads in stock TensorFlow Serving
without tensorflow-text, Keras or this package.
"""

from __future__ import annotations

import tensorflow as tf

from nplm_tf import engines
from nplm_tf.baselines import mixture
from nplm_tf.core import config as config_lib
from nplm_tf.network import forward, heads
from nplm_tf.serving import network as network_lib
from nplm_tf.serving import sampling
from pipelines import vocabulary as vocab_lib

SCORE_CHUNK = 2048  # windows per network call when scoring, at most: bounds memory for long texts
ROW_CHUNK = 2048  # contexts per call when ranking or drawing next words, at most: bounds memory for big requests
DEFAULT_K = 10


class Server(tf.Module):
    """The functions every signature is made of.

    Args:
      model: the trained Keras model, context ids (batch, n-1) -> outputs, with its `head`; or a list of them,
        an ensemble's networks (with `weights`).
      vocab: its vocabulary.
      vocab_path: the vocabulary file (`vocab.tsv`, line i = word of id i). The
        lookup tables are initialized from it, so a SavedModel holds it once,
        as an asset, and TensorFlow Serving rebuilds the tables from it.
      ngram: optional `ngram_graph.ServingNgram`; when given, every
        probability is the mixture λ(h)·P_nn + (1 - λ(h))·P_ngram. Or a list of them: an ensemble's n-grams.
      weights: an ensemble's weights, (buckets, members) in the members' order (the networks, then the n-grams),
        the bucket of a context its train frequency under the first n-gram (`mixture.context_weights`; one row:
        the same weights for every context), as `evaluate --model_dirs --save_ensemble` fits them.

    Every probability is P(w | h) = Σ_i λ_i(h) P_i(w | h) over the members, exactly normalized over |V|.
    Contexts are (batch, c) ids, oldest first, `<s>`-padded: c the longest a member reads (n - 1 of a network,
    K - 1 of a K-gram); each member reads its own last words.
    """

    def __init__(self, model, vocab: vocab_lib.Vocabulary, vocab_path: str, ngram=None, weights=None):
        super().__init__(name="nplm_server")
        models = list(model) if isinstance(model, (list, tuple)) else [model]
        self.networks = [network_lib.Network(m, name=f"network_{i}") for i, m in enumerate(models)]
        self.ngrams = list(ngram) if isinstance(ngram, (list, tuple)) else ([ngram] if ngram is not None else [])
        members = len(self.networks) + len(self.ngrams)
        # One network with one n-gram and no weights: the network's λ(h) is the n-gram's (mixture.json).
        if weights is None and len(self.networks) == 1 and len(self.ngrams) == 1:
            weights = self.ngrams[0].mixture_table
        if weights is not None:
            weights = tf.constant(weights, tf.float64)
            if weights.shape.rank != 2 or weights.shape[1] != members:
                raise ValueError(
                    f"weights of shape {weights.shape} do not give a weight per bucket to {members} members."
                )
            self.weights = tf.Variable(weights, trainable=False)
        elif members > 1:
            raise ValueError("an ensemble of several members needs their weights.")
        outputs = max(network.outputs for network in self.networks)
        self.outputs = outputs
        # Windows per network call when scoring: fewer for a wide output layer.
        self.score_chunk = config_lib.rows_per_batch(outputs, SCORE_CHUNK)
        # next_word and generate may hold a (rows, |V|) tensor (a full softmax's logits, a mixture's float64
        # P, the network tail's outputs): at most this many rows at once (`by_rows`).
        self.row_chunk = config_lib.rows_per_batch(max(outputs, vocab.size), ROW_CHUNK)
        line = tf.lookup.TextFileIndex.LINE_NUMBER
        self.ids_table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                vocab_path, tf.string, 0, tf.int64, line, delimiter="\t", vocab_size=vocab.size
            ),
            default_value=vocab.unk_id,
        )
        self.words_table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                vocab_path, tf.int64, line, tf.string, 0, delimiter="\t", vocab_size=vocab.size
            ),
            default_value=vocab_lib.UNK,
        )
        self.vocab_size = vocab.size
        # The words kept of each context: the most any member reads (a network its last n - 1, a K-gram K - 1).
        self.context_size = max(
            [network.context_size for network in self.networks] + [ngram.order - 1 for ngram in self.ngrams]
        )
        self.bos_id, self.eos_id, self.unk_id = vocab.bos_id, vocab.eos_id, vocab.unk_id
        self.single = members == 1  # one network: its head ranks and samples on its own
        head = self.networks[0].head
        # Whether `top_words` holds a (rows, |V|) tensor: a mixture's distribution, or the head's own ranking.
        self.ranks_densely = not self.single or head.ranks_densely
        # `generate` at temperature 1 over every word draws from the head without the (B, |V|) distribution
        # where the head can (`Head.sample`); not under a mixture.
        self.samples_without_distribution = self.single and head.samples_exactly(self.unk_id)

    # ---------------------------------------------------------- text -> ids --

    def token_ids(self, text: tf.Tensor) -> tf.RaggedTensor:
        """(B,) strings -> (B, (L)) int64 ids, split as training splits."""
        tokens = tf.strings.split(text)  # (B, (L))
        return tokens.with_flat_values(self.lookup(tokens.flat_values))

    def lookup(self, words: tf.Tensor) -> tf.Tensor:
        """Word strings -> int64 ids; unknown words are `<unk>`, and so is a literal "</s>" in the text, as in
        training (it is not the end of the line)."""
        return tf.where(words == vocab_lib.EOS, tf.constant(self.unk_id, tf.int64), self.ids_table.lookup(words))

    def word(self, ids: tf.Tensor) -> tf.Tensor:
        return self.words_table.lookup(tf.cast(ids, tf.int64))

    def last_context(self, text: tf.Tensor) -> tf.Tensor:
        """(B,) strings -> (B, c) ids of each text's last c words, `<s>`-padded, oldest first.

        Only those words are looked up, and no ragged tensor is built past the split: a request's cost does
        not grow with its text, and `next_word` stays a few hundred small ops.
        """
        c = self.context_size
        tokens = tf.strings.split(text)  # (B, (L))
        index = tokens.row_limits()[:, None] + tf.range(-c, 0, dtype=tf.int64)[None, :]  # (B, c)
        inside = index >= tokens.row_starts()[:, None]
        words = tf.concat([tokens.flat_values, [""]], axis=0)  # "" at the end: what an outside index reads
        ids = self.lookup(tf.gather(words, tf.where(inside, index, tf.size(words, out_type=tf.int64) - 1)))
        return tf.where(inside, ids, tf.constant(self.bos_id, tf.int64))

    def windows(self, ids: tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Every predicted token (each word, then `</s>`): contexts (T, c) oldest first, targets (T,), row splits
        (B+1,) (`forward.windows`, which the NumPy network's scoring uses too)."""
        lengths = ids.row_lengths()
        splits = tf.concat([[0], tf.cumsum(lengths + 1)], axis=0)  # predicted tokens per row
        window = forward.windows(ids.flat_values, lengths, self.context_size, self.bos_id, self.eos_id)
        return window[:, : self.context_size], window[:, self.context_size], splits

    # --------------------------------------------------------- probabilities --

    def hidden(self, context: tf.Tensor, member: int = 0) -> list[tf.Tensor]:
        """(B, c) oldest first -> network `member`'s output-layer inputs (`Network.hidden`)."""
        return self.networks[member].hidden(context)

    def network_outputs(self, context: tf.Tensor, member: int = 0) -> heads.Outputs:
        """(B, c) oldest first -> network `member`'s outputs y = b + W·x + U·tanh(d + H·x) as its head reads
        them, each block computed when asked (`Network.output_logits`)."""
        return heads.Outputs(self.hidden(context, member), self.networks[member].output_logits)

    def member_weights(self, context: tf.Tensor) -> tf.Tensor:
        """λ_i(h) of every member for each context, (B, members) or (members,) float64 (`mixture.context_weights`:
        the bucket of a context's train count under the first n-gram)."""
        counts = self.ngrams[0].context_count(context) if self.ngrams and self.weights.shape[0] > 1 else None
        return mixture.context_weights(self.weights, counts, engines.TENSORFLOW)

    def mix(self, context: tf.Tensor, values: list[tf.Tensor]) -> tf.Tensor:
        """Σ_i λ_i(h) · values_i, each (B,) or (B, |V|) float64, in the members' order (`mixture.mix`)."""
        return mixture.mix(values, self.member_weights(context))

    def distribution(self, context: tf.Tensor) -> tf.Tensor:
        """(B, c) oldest first -> (B, |V|) float64 P(· | context), the mixture's when there is one."""
        ps = [net.head.distribution(self.network_outputs(context, i), context) for i, net in enumerate(self.networks)]
        ps += [ngram.distribution(context) for ngram in self.ngrams]
        return ps[0] if self.single else self.mix(context, ps)

    def token_log_probs(self, context: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """ln P(target | context), (T,) float64, each network run on chunks of `score_chunk` windows."""
        total = tf.shape(target)[0]
        ctx, tgt = self.in_chunks((context, target), self.score_chunk)

        def network_log_probs(i):
            def chunk_log_probs(args):
                return self.networks[i].head.log_prob(self.network_outputs(args[0], i), args[0], args[1])

            return tf.cond(  # an empty batch has no chunk, and map_fn cannot stack zero chunks of unknown size
                total > 0,
                lambda: tf.reshape(tf.map_fn(chunk_log_probs, (ctx, tgt), fn_output_signature=tf.float64), [-1])[
                    :total
                ],
                lambda: tf.zeros([0], tf.float64),
            )

        ln = [network_log_probs(i) for i in range(len(self.networks))]
        if self.single:
            return ln[0]
        ps = [tf.exp(x) for x in ln] + [ngram.token_probabilities(context, target) for ngram in self.ngrams]
        return tf.math.log(self.mix(context, ps))

    # ------------------------------------------------------------ signatures --

    def in_chunks(self, tensors: tuple[tf.Tensor, ...], most: int) -> tuple[tf.Tensor, ...]:
        """(contexts (T, c), then any other tensors of T rows) -> each as (chunks, size, ...): the fewest chunks
        of at most `most` rows, of equal size, the last padded with `<s>` contexts and zeros (none for T = 0)."""
        total = tf.shape(tensors[0])[0]
        chunks = (total + most - 1) // most
        size = tf.maximum((total + chunks - 1) // tf.maximum(chunks, 1), 1)  # equal chunks, little padding
        pad = chunks * size - total

        def split(t: tf.Tensor, fill) -> tf.Tensor:
            padded = tf.pad(t, [[0, pad]] + [[0, 0]] * (t.shape.rank - 1), constant_values=fill)
            return tf.reshape(padded, [chunks, size, *t.shape[1:]])

        return (split(tensors[0], self.bos_id), *(split(t, 0) for t in tensors[1:]))

    def by_rows(self, fn, context: tf.Tensor, signature):
        """fn(contexts, chunk) for (B, c) contexts, on at most `row_chunk` rows at a time: one call with chunk
        0 for a request that small, else a call per chunk of equal size (the last padded with `<s>` contexts),
        its results (each (rows, ...), `signature` their tf.TensorSpec structure) joined in order."""
        rows = tf.shape(context)[0]

        def chunked():
            chunks = self.in_chunks((context,), self.row_chunk)[0]
            parts = tf.map_fn(
                lambda args: fn(args[0], args[1]),
                (chunks, tf.range(tf.shape(chunks)[0])),
                fn_output_signature=signature,
            )
            join = lambda t: tf.reshape(t, tf.concat([[-1], tf.shape(t)[2:]], axis=0))[:rows]  # noqa: E731
            return tf.nest.map_structure(join, parts)

        return tf.cond(rows <= self.row_chunk, lambda: fn(context, tf.constant(0)), chunked)

    def top_words(self, context: tf.Tensor, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(B, c) oldest first -> the k most probable next words over all |V|, most probable first: P (B, k)
        float64 and ids (B, k) int64; ties go to the lower id. `k` must be in [0, |V|]. At most `row_chunk`
        contexts are ranked at once where ranking holds a (rows, |V|) tensor."""
        if not self.ranks_densely:  # a short list's own ranking holds no (B, |V|) tensor: not worth a tf.cond
            return self.top_words_of(context, k)
        signature = (tf.TensorSpec([None, None], tf.float64), tf.TensorSpec([None, None], tf.int64))
        return self.by_rows(lambda rows, _: self.top_words_of(rows, k), context, signature)

    def top_words_of(self, context: tf.Tensor, k: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`top_words` for contexts ranked at once."""
        if self.single:  # the head ranks its own outputs (a short list: not all of |V|)
            return self.networks[0].head.top_k(self.network_outputs(context), context, k)
        top = tf.math.top_k(self.distribution(context), k=k)
        return top.values, tf.cast(top.indices, tf.int64)

    def next_word(self, text: tf.Tensor, k: tf.Tensor) -> dict[str, tf.Tensor]:
        k = tf.clip_by_value(tf.cast(k, tf.int32), 0, self.vocab_size)
        values, ids = self.top_words(self.last_context(text), k)
        return {"words": self.word(ids), "probabilities": tf.cast(values, tf.float32), "ids": tf.cast(ids, tf.int32)}

    def score(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        ids = self.token_ids(text)
        context, target, splits = self.windows(ids)
        ln = tf.RaggedTensor.from_row_splits(self.token_log_probs(context, target), splits, validate=False)
        lengths = tf.cast(ln.row_lengths(), tf.int32)
        log_prob = tf.reduce_sum(ln, axis=1)
        oov = tf.RaggedTensor.from_row_splits(target == self.unk_id, splits, validate=False)
        return {
            "token_log_probs": ln.to_tensor(0.0),  # (B, max tokens + 1), natural log, 0 past each length
            "mask": tf.sequence_mask(lengths),
            "lengths": lengths,  # predicted tokens: the words and </s>
            "log_prob": log_prob,
            "perplexity": tf.exp(-log_prob / tf.cast(lengths, tf.float64)),
            "oov": oov.to_tensor(False),
            "tokens": tf.RaggedTensor.from_row_splits(self.word(target), splits, validate=False).to_tensor(""),
        }

    def generate(self, prompt, max_tokens, temperature, top_k, seed, allow_unk=False) -> dict[str, tf.Tensor]:
        """`sampling.generate` on this server."""
        return sampling.generate(self, prompt, max_tokens, temperature, top_k, seed, allow_unk)
