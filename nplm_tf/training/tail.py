"""The n-gram a short-list model keeps for its tail: built on train, or taken from an n-gram directory."""

from __future__ import annotations

import filecmp
import os
import shutil

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines import network_mixture
from nplm_tf.core.config import Config, ConfigError
from nplm_tf.core.run_dir import RunDir
from nplm_tf.network import heads
from nplm_tf.network.loading import check_kneser_ney, check_tail_model, load_tail_ngram
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib


class NewTail:
    """The n-gram a new short-list run will keep for its tail, in hand before the run writes anything
    (`prepare_data`'s check), and kept for `keep_tail`: the Kneser-Ney model in --ngram_dir, checked against
    the run's vocabulary and tail order, or, where `corpus` is given (the process that writes the run), the
    model built on its train split, so that a pruning that would empty an order is refused first too."""

    def __init__(
        self, config: Config, kind: type[heads.Head], ngram_dir: str | None, corpus: corpus_lib.Corpus | None = None
    ):
        if ngram_dir and config.tail_ngram_prune:
            raise ConfigError(
                f"--tail_ngram_prune prunes the tail n-gram that training builds; the model in --ngram_dir={ngram_dir} "
                "is used as it was built (prune it with nplm_tf.ngram --prune)."
            )
        self.config, self.ngram_dir, self.corpus, self.model = config, ngram_dir, corpus, None
        self.needed = kind.needs_ngram  # the run's head (`heads.kind`) scores its tail with a Kneser-Ney n-gram

    def __call__(self, vocab: vocab_lib.Vocabulary) -> None:
        if not self.needed:
            return
        if self.ngram_dir:
            self.model = tail_ngram(vocab, None, self.config.tail_order, self.ngram_dir)
            check_tail_model(self.model, self.config, self.ngram_dir)
        elif self.corpus is not None:
            self.model = tail_ngram(vocab, self.corpus, self.config.tail_order, prune=self.config.tail_prune)


def check_kept_tail(kind: type[heads.Head], model_dir: str, ngram_dir: str | None) -> None:
    """Refuses an --ngram_dir that is not the tail a run set up before keeps (it is never read again, and a
    continued run would otherwise score with another n-gram than the user named)."""
    kept = RunDir(RunDir(model_dir).tail_ngram_dir).ngram_model
    if not (kind.needs_ngram and ngram_dir and os.path.isfile(kept)):
        return
    given = RunDir(ngram_dir).ngram_model
    if not os.path.isfile(given) or not filecmp.cmp(kept, given, shallow=False):
        raise ConfigError(
            f"{model_dir} keeps the tail n-gram it was set up with, which is not the model in --ngram_dir="
            f"{ngram_dir}; continue without --ngram_dir, or train in a new --model_dir."
        )


def keep_tail(config: Config, vocab: vocab_lib.Vocabulary, model_dir: str, new: NewTail) -> kn.KneserNey | None:
    """The n-gram of a short-list run's n-gram tail, kept in MODEL_DIR/tail_ngram (None for a full softmax or
    the network tail, which have none: `new.needed`); `Head.attach_ngram` gives it to the head.

    The first run keeps `new`'s model: modified Kneser-Ney of order `config.tail_order` built on the train
    split with the network's vocabulary (pruned at `config.tail_prune`), or a copy of the model in
    `new.ngram_dir` (same vocabulary, order K), both in hand since `prepare_data` set the run up; later runs
    reload it.
    """
    run = RunDir(model_dir)
    tail_dir = RunDir(run.tail_ngram_dir)
    if not new.needed:
        return None
    if os.path.isfile(tail_dir.ngram_model):  # built already
        return load_tail_ngram(run, config)
    if new.model is None:  # a run set up before, whose tail was not kept yet
        new(vocab)
    model = new.model
    os.makedirs(tail_dir.path, exist_ok=True)  # once the model is in hand and checked
    if new.ngram_dir:
        files.replace_atomically(
            tail_dir.ngram_model, lambda tmp: shutil.copyfile(RunDir(new.ngram_dir).ngram_model, tmp)
        )
    else:
        ngram_lib.save(model, tail_dir.path)
    tail_dir.save_vocab(vocab)
    return model  # the model in hand, not read back


def tail_ngram(
    vocab: vocab_lib.Vocabulary,
    corpus: corpus_lib.Corpus | None,
    order: int,
    ngram_dir: str | None = None,
    prune: tuple[int, ...] = (),
) -> kn.KneserNey:
    """A short list's tail model: the Kneser-Ney model in `ngram_dir` (checked: the network's vocabulary, and
    Kneser-Ney), or modified Kneser-Ney of `order` built on the train split with the network's vocabulary and
    pruned at the thresholds `prune` (`KneserNey.prune`; none: unpruned)."""
    if ngram_dir:
        model = network_mixture.load_checked(vocab, ngram_dir)
        check_kneser_ney(model, ngram_dir)
        return model
    pruned = any(prune)
    print(f"building the tail's Kneser-Ney {order}-gram on train{' and pruning it' if pruned else ''}", flush=True)
    model = kn.KneserNey(ngram_lib.token_arrays(corpus["train"], vocab), order, vocab.size)
    if pruned:
        model.prune(prune, name="tail_ngram_prune")
    return model
