"""What training knows about a corpus before it starts: the vocabulary, token counts and datasets."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from nplm_tf.core import config as config_lib
from nplm_tf.core.config import Config
from nplm_tf.core.run_dir import RunDir
from nplm_tf.network import forward, heads
from pipelines import corpus as corpus_lib
from pipelines import vocabulary as vocab_lib

if TYPE_CHECKING:  # the datasets load TensorFlow; `prepare_data` does not (`run_setup`)
    import tensorflow as tf

EVAL_BATCH_SIZE = 1024  # windows per scoring batch, at most


def eval_batch_size(head: heads.Head) -> int:
    """Windows per scoring batch of a model with `head`: `EVAL_BATCH_SIZE`, fewer where the output layer is
    wider than 131,072 (a full or sampled softmax over a large vocabulary), so that a batch holds at most
    `config.LOGITS_PER_BATCH` logits."""
    return config_lib.rows_per_batch(head.output_size(), EVAL_BATCH_SIZE)


@dataclasses.dataclass(frozen=True)
class Data:
    """What the pipeline knows about a corpus before training: vocabulary and sizes."""

    vocab: vocab_lib.Vocabulary
    tokens: dict[str, int]  # predicted tokens per split (tokens + one </s> per line)

    def dataset(
        self, corpus: corpus_lib.Corpus, split: str, config: Config, head: heads.Head | None = None, **kwargs
    ) -> tf.data.Dataset:
        """The windows of `split`: batches of `batch_size` (training), else as a model with `head` scores them."""
        return window_dataset(
            corpus[split],
            self.vocab,
            config.order,
            kwargs.pop("batch_size", None) or eval_batch_size(head),
            self.tokens[split],
            **kwargs,
        )

    def train_dataset(self, corpus: corpus_lib.Corpus, config: Config, epoch) -> tf.data.Dataset:
        """The shuffled training batches of `epoch` (a number, or a variable read as each iterator starts)."""
        return self.dataset(
            corpus,
            "train",
            config,
            batch_size=config.batch_size,
            shuffle=True,
            shuffle_buffer=config.shuffle_buffer,
            seed=config.seed,
            epoch=epoch,
        )


def split_tokens(split: corpus_lib.Split) -> int:
    _, tokens, lines = vocab_lib.count_split(split)
    return tokens + lines


def eval_dataset(
    split: corpus_lib.Split, vocab: vocab_lib.Vocabulary, config: Config, head: heads.Head
) -> tf.data.Dataset:
    """Every window of `split`, in order, for exact scoring by a model with `head` (counts the split's tokens
    once)."""
    return window_dataset(split, vocab, config.order, eval_batch_size(head), split_tokens(split))


def window_dataset(split: corpus_lib.Split, vocab: vocab_lib.Vocabulary, order: int, batch: int, tokens: int, **kwargs):
    """`pipelines.windows.window_dataset`, windowing as the model's scoring does (`forward.windows`)."""
    # deferred: TensorFlow loads when this runs, not with the module
    from pipelines import windows

    return windows.window_dataset(split, vocab, order, batch, tokens, windowing=forward.windows, **kwargs)


def prepare_data(
    config: Config,
    corpus: corpus_lib.Corpus,
    model_dir: str | None = None,
    check: Callable[[vocab_lib.Vocabulary], None] | None = None,
) -> Data:
    """`prepare_vocabulary`'s vocabulary, and the tokens of each split; a note when valid holds words that
    the network cannot have learned (`untrained_unk_note`)."""
    vocab = prepare_vocabulary(config, corpus, model_dir, check)
    tokens = {}
    for name in corpus_lib.SPLITS:
        counts, words, lines = vocab_lib.count_split(corpus[name])
        tokens[name] = words + lines
        note = untrained_unk_note(vocab, counts, tokens[name]) if name == "valid" else None
        if note:
            print(note, flush=True)
    return Data(vocab, tokens)


def untrained_unk_note(vocab: vocab_lib.Vocabulary, counts, predicted: int) -> str | None:
    """One sentence when train holds no `<unk>` (every word of it is in the vocabulary: --min_count=1 without
    --max_vocab) while valid (`counts`: its word counts; `predicted`: its tokens, `</s>` included) holds words
    outside the vocabulary: the network never trains on `<unk>`, so those words get whatever probability it
    was left with, and perplexity counts them; else None."""
    if vocab.counts[vocab.unk_id] or not predicted:
        return None
    unknown = vocab.unknown(counts)
    if not unknown:
        return None
    return (
        f"note: every word of train is in the vocabulary, so the network never trains on <unk>, yet {unknown:,} of "
        f"valid's {predicted:,} tokens ({unknown / predicted:.1%}) are words outside it, which perplexity counts "
        "with an untrained probability; a --min_count above 1 (or a --max_vocab) makes train's rarest words <unk>."
    )


LARGE_VOCABULARY = 20_000  # |V| from which `train` suggests a short list or sampled training to a full softmax


def large_vocabulary_note(head: heads.Head) -> str | None:
    """One sentence when a full-softmax run's vocabulary is large enough that its output layer, O(h·|V|) per
    token, is most of the training time and a short list or sampled training trains several times faster
    (benchmarks/README.md, GCIDE); else None."""
    if head.vocab_size < LARGE_VOCABULARY or head.name != "softmax" or head.sampled:
        return None
    return (
        f"note: |V| = {head.vocab_size:,}, so the full softmax's output layer takes most of each step; a short list "
        "(--shortlist=4000) or sampled training (--loss=sampled_softmax --num_sampled=500) trains several times "
        "faster and is still evaluated exactly "
        "(docs/large_vocabularies.md)."
    )


def prepare_vocabulary(
    config: Config,
    corpus: corpus_lib.Corpus,
    model_dir: str | None = None,
    check: Callable[[vocab_lib.Vocabulary], None] | None = None,
) -> vocab_lib.Vocabulary:
    """Checks every split, builds (or reloads) the vocabulary and checks the settings that depend on |V|. A
    run's vocabulary is reloaded only once its config.json exists (its setup finished). `check(vocab)`
    refuses what else depends on a new vocabulary before anything is written."""
    for name in corpus_lib.SPLITS:
        corpus_lib.check_split(corpus[name], config.order)
    run = RunDir(model_dir) if model_dir else None
    reload = run is not None and run.has_config() and run.has_vocab()
    vocab = run.load_vocab() if reload else vocab_lib.build(corpus["train"], config.min_count, config.max_vocab)
    config.check_vocab_size(vocab.size)
    if check and not reload:
        check(vocab)
    if run and not reload:
        run.save_vocab(vocab)
    return vocab
