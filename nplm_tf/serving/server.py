"""The serving graph: raw UTF-8 text in, next words, scores and generated text out.

Tokenization is training's (`tf.strings.split` on whitespace, then the
vocabulary table; unknown words are `<unk>`), context padding is training's
(`<s>` before the first word) and the network is the trained Keras model
itself, so served probabilities are `nplm_tf.evaluate`'s. Only core
TensorFlow ops are used: the SavedModel loads in stock TensorFlow Serving
without tensorflow-text, Keras or this package.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from nplm_tf import config as config_lib
from nplm_tf.network import heads
from nplm_tf.network import layer as layer_lib
from pipelines import vocabulary as vocab_lib

SCORE_CHUNK = 2048  # windows per network call when scoring, at most: bounds memory for long texts
ROW_CHUNK = 2048  # contexts per call when ranking or drawing next words, at most: bounds memory for big requests
DEFAULT_K = 10
MAX_GENERATE = 1024  # generate's max_tokens is clipped to this
GENERATE_ROWS = 256  # `nplm_tf.generate` makes its --num_samples rows this many at a time


def group_seed(seed: int, group: int) -> int:
    """`nplm_tf.generate`'s seed for its `group`-th GENERATE_ROWS rows: `seed` itself for the first, then a
    64-bit seed drawn from (seed, group), so that no two groups (of this seed or another) repeat each other's."""
    if group == 0:
        return seed

    state = np.random.SeedSequence([seed % 2**64, group]).generate_state(1, np.uint64)
    return int(state.view(np.int64)[0])


class Network(tf.Module):
    """One network as the serving graph computes it: its weights held in the compute dtype, and its head.

    Args:
      model: the trained Keras model, context ids (batch, n-1) -> outputs, with its `head` (`network.heads`),
        which turns them into P over the whole vocabulary (a short list's with its tail).
    """

    def __init__(self, model: keras.Model, name: str = "network"):
        super().__init__(name=name)
        layer = model.get_layer("nplm")
        self.compute_dtype = tf.as_dtype(layer.compute_dtype)
        # The weights as the layer uses them: cast once here, not on every
        # request (casting U per call would cost more than a one-row forward pass).
        held = lambda w, dtype: tf.Variable(tf.cast(w, dtype), trainable=False)  # noqa: E731
        # Output weights stored as rows (sampled training) are transposed once here: the same matmul as any model.
        output = lambda w: tf.transpose(w) if w is not None and layer.output_rows else w  # noqa: E731
        self.C, self.H, self.d = (
            held(w, self.compute_dtype) if w is not None else None for w in (layer.C, layer.H, layer.d)
        )
        self.direct = layer.W is not None  # y has the direct connections W·x
        self.b = held(layer.b, tf.float32)
        self.head = model.head
        self.head_state = self.head.graph_state()  # its tables, tracked by the SavedModel
        self.head.prepare_serving()  # next_word's tables
        self.outputs = int(self.b.shape[0])
        self.context_size = layer.context_size  # n - 1, the words the network reads
        # The output weights [U; W] in column blocks: the network tail's head (outputs 0..N) and tail apart, so
        # that computing either reads its own block instead of copying a slice of the matrix on every request.
        after_list = self.head.block_bounds_after_list
        bounds = [0, self.head.list_size + 1, self.outputs] if after_list else [0, self.outputs]
        weights = [output(w) for w in (layer.U, layer.W) if w is not None]
        self.output_blocks = [
            [held(w[:, start:stop], self.compute_dtype) for w in weights] for start, stop in zip(bounds, bounds[1:])
        ]
        self.block_bounds = bounds

    def hidden(self, context: tf.Tensor) -> list[tf.Tensor]:
        """(B, c) oldest first -> the output layer's inputs, [tanh(d + H·x)] and x when W exists, as
        `NPLMLayer.hidden` computes them (`layer.output_layer_inputs`), from the last n-1 words."""
        if context.shape[1] != self.context_size:  # a mixture's longer context: the network's part
            context = context[:, context.shape[1] - self.context_size :]
        return layer_lib.output_layer_inputs(layer_lib.word_features(self.C, context), self.H, self.d, self.direct)

    def output_logits(self, parts: list[tf.Tensor], start=0, stop=None) -> tf.Tensor:
        """y = b + W·x + U·tanh(d + H·x) for outputs start..stop-1, (B, stop - start) float32. start and stop
        (None: the last output) must be bounds of the held blocks (`block_bounds`)."""
        stop = self.outputs if stop is None else stop
        bounds = self.block_bounds
        if start not in bounds or stop not in bounds or start >= stop:
            raise ValueError(f"outputs {start}..{stop} are not a run of the served blocks {bounds}.")
        ys = [
            layer_lib.output_sum(parts, block) for block in self.output_blocks[bounds.index(start) : bounds.index(stop)]
        ]
        y = ys[0] if len(ys) == 1 else tf.concat(ys, axis=1)
        return tf.cast(y, tf.float32) + self.b[start:stop]


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
        the bucket of a context its train frequency under the first n-gram (`ngram_graph.bucket`; one row:
        the same weights for every context), as `evaluate --model_dirs --save_ensemble` fits them.

    Every probability is P(w | h) = Σ_i λ_i(h) P_i(w | h) over the members, exactly normalized over |V|.
    Contexts are (batch, c) ids, oldest first, `<s>`-padded: c the longest a member reads (n - 1 of a network,
    K - 1 of a K-gram); each member reads its own last words.
    """

    def __init__(self, model, vocab: vocab_lib.Vocabulary, vocab_path: str, ngram=None, weights=None):
        super().__init__(name="nplm_server")
        models = list(model) if isinstance(model, (list, tuple)) else [model]
        self.networks = [Network(m, name=f"network_{i}") for i, m in enumerate(models)]
        self.ngrams = list(ngram) if isinstance(ngram, (list, tuple)) else ([ngram] if ngram is not None else [])
        members = len(self.networks) + len(self.ngrams)
        # One network with one n-gram and no weights: the network's λ(h) is the n-gram's (mixture.json).
        self.mixture_of_one = weights is None and len(self.networks) == 1 and len(self.ngrams) == 1
        if weights is not None:
            weights = tf.constant(weights, tf.float64)
            if weights.shape.rank != 2 or weights.shape[1] != members:
                raise ValueError(
                    f"weights of shape {weights.shape} do not give a weight per bucket to {members} members."
                )
            self.weights = tf.Variable(weights, trainable=False)
        elif members > 1 and not self.mixture_of_one:
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
        """Every predicted token (each word, then `</s>`): contexts (T, c) oldest first, targets (T,), row splits (B+1,)."""
        c, rows = self.context_size, ids.nrows()
        bos = tf.RaggedTensor.from_tensor(tf.fill([rows, c], tf.constant(self.bos_id, tf.int64)))
        eos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(self.eos_id, tf.int64)))
        padded = tf.concat([bos, ids, eos], axis=1)  # (B, (c + L + 1))
        splits = tf.concat([[0], tf.cumsum(ids.row_lengths() + 1)], axis=0)  # predicted tokens per row
        total = splits[-1]
        row = tf.ragged.row_splits_to_segment_ids(splits)  # (T,)
        position = tf.range(total) - tf.gather(splits, row)  # (T,) index of the target within its row
        start = tf.gather(padded.row_splits, row) + position  # (T,) first context word
        window = tf.gather(padded.flat_values, start[:, None] + tf.range(c + 1, dtype=tf.int64)[None, :])  # (T, c + 1)
        return window[:, :c], window[:, c], splits

    # --------------------------------------------------------- probabilities --

    def hidden(self, context: tf.Tensor, member: int = 0) -> list[tf.Tensor]:
        """(B, c) oldest first -> network `member`'s output-layer inputs (`Network.hidden`)."""
        return self.networks[member].hidden(context)

    def network_outputs(self, context: tf.Tensor, member: int = 0) -> heads.Outputs:
        """(B, c) oldest first -> network `member`'s outputs y = b + W·x + U·tanh(d + H·x) as its head reads
        them, each block computed when asked (`Network.output_logits`)."""
        return heads.Outputs(self.hidden(context, member), self.networks[member].output_logits)

    def member_weights(self, context: tf.Tensor) -> tf.Tensor:
        """λ_i(h) of every member for each context, (B, members) float64."""
        if self.mixture_of_one:
            lam = self.ngrams[0].mixture_weight(context)
            return tf.stack([lam, 1 - lam], axis=1)
        buckets = int(self.weights.shape[0])
        if buckets == 1 or not self.ngrams:
            return tf.tile(self.weights[:1], [tf.shape(context)[0], 1])
        return tf.gather(self.weights, self.ngrams[0].context_bucket(context, buckets))

    def mix(self, context: tf.Tensor, values: list[tf.Tensor]) -> tf.Tensor:
        """Σ_i λ_i(h) · values_i, each (B, ...) float64, in the members' order."""
        lam = self.member_weights(context)
        total = None
        for i, value in enumerate(values):
            w = lam[:, i] if value.shape.rank == 1 else lam[:, i : i + 1]
            total = w * value if total is None else total + w * value
        return total

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
        """Samples up to max_tokens words per prompt; greedy when temperature <= 0; stops at `</s>`.

        With top_k > 0 each word is drawn among `next_word`'s k best (ties to the lower id), which `top_words`
        finds without the (B, |V|) distribution; top_k <= 0 draws from every word (a short list's at temperature
        1 without that distribution either: `Head.sample`). Unless `allow_unk`, `<unk>` is never
        chosen: the other words' probabilities are renormalized. A request of more than `row_chunk` prompts is
        generated in chunks of at most that many (`by_rows`), each after the first with seeds of its own.
        """
        allow_unk = tf.cast(allow_unk, tf.bool)
        exclude = tf.one_hot(self.unk_id, self.vocab_size, on_value=True, off_value=False) & ~allow_unk
        steps = tf.clip_by_value(tf.cast(max_tokens, tf.int32), 0, MAX_GENERATE)
        temperature = tf.cast(temperature, tf.float64)
        # NaN would make every logit NaN, and `<unk>` was then drawn every time, allowed or not.
        tf.debugging.Assert(~tf.math.is_nan(temperature), ["temperature=nan must be a number (<= 0: greedy)."])
        top_k = tf.clip_by_value(tf.cast(top_k, tf.int32), 0, self.vocab_size)
        seed = tf.cast(seed, tf.int64)
        greedy_only = temperature <= 0
        # The words one step ranks: 1 when greedy, else top_k; one more when <unk> may have to be skipped.
        wanted = tf.where(greedy_only, 1, top_k)
        ranked = tf.minimum(wanted + tf.where(allow_unk, 0, 1), self.vocab_size)
        context = self.last_context(prompt)  # (B, c)

        def generate_rows(context, chunk):  # (rows, c) -> (rows, steps) the words drawn, `</s>` after the end
            rows = tf.shape(context)[0]

            def step_seed(i) -> tf.Tensor:
                # The stateless seed pair of step i, (seed, i); a request of over `row_chunk` rows generates
                # chunk j with (seed, i + j·2^32): chunk 0 as a smaller request, the others apart (i < 2^32).
                return tf.stack([seed, tf.cast(i, tf.int64) + tf.cast(chunk, tf.int64) * 2**32])

            def draw(logits: tf.Tensor, i) -> tf.Tensor:  # (rows, candidates) -> (rows,) the candidate drawn
                return tf.random.stateless_categorical(logits, 1, seed=step_seed(i))[:, 0]

            def among_best(context, i):
                values, ids = self.top_words_of(context, ranked)  # (rows, ranked), most probable first
                usable = (ids != self.unk_id) | allow_unk
                kept = usable & (tf.cumsum(tf.cast(usable, tf.int32), axis=1) <= wanted)
                greedy = tf.gather(ids, tf.argmax(tf.cast(kept, tf.int32), axis=1), batch_dims=1)
                temperate = tf.math.log(values) / tf.maximum(temperature, 1e-6)
                logits = tf.where(kept, temperate, tf.constant(-1e30, tf.float64))
                sampled = tf.gather(ids, draw(logits, i), batch_dims=1)
                return tf.where(greedy_only, greedy, sampled)

            def from_distribution(context, i):
                probs = self.distribution(context)  # (rows, |V|)
                probs = tf.where(exclude[None, :], tf.constant(0.0, tf.float64), probs)
                probs = probs / tf.reduce_sum(probs, axis=1, keepdims=True)
                return draw(tf.math.log(probs) / tf.maximum(temperature, 1e-6), i)

            def among_all(context, i):
                if not self.samples_without_distribution:
                    return from_distribution(context, i)

                def from_parts():  # at temperature 1: drawn by the head from its parts, exactly
                    outputs = self.network_outputs(context)
                    return self.networks[0].head.sample(outputs, context, step_seed(i), self.unk_id, ~allow_unk)

                return tf.cond(tf.equal(temperature, 1.0), from_parts, lambda: from_distribution(context, i))

            def step(i, context, done, generated):
                best = greedy_only | (top_k > 0)
                word = tf.cond(best, lambda: among_best(context, i), lambda: among_all(context, i))
                word = tf.where(done, tf.constant(self.eos_id, tf.int64), word)
                context = tf.concat([context[:, 1:], word[:, None]], axis=1)
                return i + 1, context, done | (word == self.eos_id), tf.concat([generated, word[:, None]], axis=1)

            _, _, _, generated = tf.while_loop(
                lambda i, _c, done, _g: (i < steps) & ~tf.reduce_all(done),
                step,
                (tf.constant(0), context, tf.zeros([rows], tf.bool), tf.zeros([rows, 0], tf.int64)),
                shape_invariants=(
                    tf.TensorShape([]),
                    context.shape,
                    tf.TensorShape([None]),
                    tf.TensorShape([None, None]),
                ),
            )
            return tf.pad(generated, [[0, 0], [0, steps - tf.shape(generated)[1]]], constant_values=self.eos_id)

        # At most `row_chunk` rows at a time: a step may hold a (rows, |V|) distribution.
        generated = self.by_rows(generate_rows, context, tf.TensorSpec([None, None], tf.int64))
        continuation = tf.RaggedTensor.from_tensor(generated, padding=tf.constant(self.eos_id, tf.int64))
        continuation = tf.strings.reduce_join(tf.ragged.map_flat_values(self.word, continuation), axis=1, separator=" ")
        spacer = tf.where((tf.strings.length(prompt) > 0) & (tf.strings.length(continuation) > 0), " ", "")
        return {
            "continuation": continuation,
            "text": tf.strings.join([prompt, spacer, continuation]),
            "generated_tokens": tf.cast(tf.reduce_sum(tf.cast(generated != self.eos_id, tf.int32), axis=1), tf.int32),
        }
