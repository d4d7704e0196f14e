"""Generated text in the serving graph (`Server.generate`): words drawn from the network, its mixture or ensemble,
a step at a time, among the k best or from the whole distribution, with stateless seeds."""

from __future__ import annotations

import tensorflow as tf

GENERATE_ROWS = 256  # `nplm_tf.generate` makes its --num_samples rows this many at a time
MAX_GENERATE = 1024  # generate's max_tokens is clipped to this


def generate(server, prompt, max_tokens, temperature, top_k, seed, allow_unk=False) -> dict[str, tf.Tensor]:
    """Samples up to max_tokens words per prompt; greedy when temperature <= 0; stops at `</s>`.

    With top_k > 0 each word is drawn among `next_word`'s k best (ties to the lower id), which `top_words`
    finds without the (B, |V|) distribution; top_k <= 0 draws from every word (a short list's at temperature
    1 without that distribution either: `Head.sample`). Unless `allow_unk`, `<unk>` is never
    chosen: the other words' probabilities are renormalized. A request of more than `row_chunk` prompts is
    generated in chunks of at most that many (`by_rows`), each after the first with seeds of its own.
    """
    allow_unk = tf.cast(allow_unk, tf.bool)
    exclude = tf.one_hot(server.unk_id, server.vocab_size, on_value=True, off_value=False) & ~allow_unk
    steps = tf.clip_by_value(tf.cast(max_tokens, tf.int32), 0, MAX_GENERATE)
    temperature = tf.cast(temperature, tf.float64)
    # NaN would make every logit NaN, and `<unk>` was then drawn every time, allowed or not.
    tf.debugging.Assert(~tf.math.is_nan(temperature), ["temperature=nan must be a number (<= 0: greedy)."])
    top_k = tf.clip_by_value(tf.cast(top_k, tf.int32), 0, server.vocab_size)
    seed = tf.cast(seed, tf.int64)
    greedy_only = temperature <= 0
    # The words one step ranks: 1 when greedy, else top_k; one more when <unk> may have to be skipped.
    wanted = tf.where(greedy_only, 1, top_k)
    ranked = tf.minimum(wanted + tf.where(allow_unk, 0, 1), server.vocab_size)
    context = server.last_context(prompt)  # (B, c)

    def generate_rows(context, chunk):  # (rows, c) -> (rows, steps) the words drawn, `</s>` after the end
        rows = tf.shape(context)[0]

        def step_seed(i) -> tf.Tensor:
            # The stateless seed pair of step i, (seed, i); a request of over `row_chunk` rows generates
            # chunk j with (seed, i + j·2^32): chunk 0 as a smaller request, the others apart (i < 2^32).
            return tf.stack([seed, tf.cast(i, tf.int64) + tf.cast(chunk, tf.int64) * 2**32])

        def draw(logits: tf.Tensor, i) -> tf.Tensor:  # (rows, candidates) -> (rows,) the candidate drawn
            return tf.random.stateless_categorical(logits, 1, seed=step_seed(i))[:, 0]

        def among_best(context, i):
            values, ids = server.top_words_of(context, ranked)  # (rows, ranked), most probable first
            usable = (ids != server.unk_id) | allow_unk
            kept = usable & (tf.cumsum(tf.cast(usable, tf.int32), axis=1) <= wanted)
            greedy = tf.gather(ids, tf.argmax(tf.cast(kept, tf.int32), axis=1), batch_dims=1)
            temperate = tf.math.log(values) / tf.maximum(temperature, 1e-6)
            logits = tf.where(kept, temperate, tf.constant(-1e30, tf.float64))
            sampled = tf.gather(ids, draw(logits, i), batch_dims=1)
            return tf.where(greedy_only, greedy, sampled)

        def from_distribution(context, i):
            probs = server.distribution(context)  # (rows, |V|)
            probs = tf.where(exclude[None, :], tf.constant(0.0, tf.float64), probs)
            probs = probs / tf.reduce_sum(probs, axis=1, keepdims=True)
            return draw(tf.math.log(probs) / tf.maximum(temperature, 1e-6), i)

        def among_all(context, i):
            if not server.samples_without_distribution:
                return from_distribution(context, i)

            def from_parts():  # at temperature 1: drawn by the head from its parts, exactly
                outputs = server.network_outputs(context)
                return server.networks[0].head.sample(outputs, context, step_seed(i), server.unk_id, ~allow_unk)

            return tf.cond(tf.equal(temperature, 1.0), from_parts, lambda: from_distribution(context, i))

        def step(i, context, done, generated):
            best = greedy_only | (top_k > 0)
            word = tf.cond(best, lambda: among_best(context, i), lambda: among_all(context, i))
            word = tf.where(done, tf.constant(server.eos_id, tf.int64), word)
            context = tf.concat([context[:, 1:], word[:, None]], axis=1)
            return i + 1, context, done | (word == server.eos_id), tf.concat([generated, word[:, None]], axis=1)

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
        return tf.pad(generated, [[0, 0], [0, steps - tf.shape(generated)[1]]], constant_values=server.eos_id)

    # At most `row_chunk` rows at a time: a step may hold a (rows, |V|) distribution.
    generated = server.by_rows(generate_rows, context, tf.TensorSpec([None, None], tf.int64))
    continuation = tf.RaggedTensor.from_tensor(generated, padding=tf.constant(server.eos_id, tf.int64))
    continuation = tf.strings.reduce_join(tf.ragged.map_flat_values(server.word, continuation), axis=1, separator=" ")
    spacer = tf.where((tf.strings.length(prompt) > 0) & (tf.strings.length(continuation) > 0), " ", "")
    return {
        "continuation": continuation,
        "text": tf.strings.join([prompt, spacer, continuation]),
        "generated_tokens": tf.cast(tf.reduce_sum(tf.cast(generated != server.eos_id, tf.int32), axis=1), tf.int32),
    }
