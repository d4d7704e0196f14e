"""The vocabulary: built in one streaming pass over train, saved beside the model.

Ids 0 .. |V|-1 are the predictable types, most frequent first: `</s>` (0),
`<unk>` (1), then every word seen at least `min_count` times in train (count
descending, then by string; with `max_size`, only the first max_size - 2 of them, so that
|V| <= max_size). The input-only padding symbol `<s>` is id |V|, so
the softmax has exactly |V| outputs and the feature matrix C has |V| + 1 rows.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines.errors import UserError

if TYPE_CHECKING:
    import tensorflow as tf

EOS, UNK, BOS = "</s>", "<unk>", "<s>"
MIN_SIZE = 3  # a size limit keeps at least one word beside </s> and <unk>


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    words: tuple[str, ...]  # predictable types by id; words[0] = </s>, words[1] = <unk>
    counts: tuple[int, ...]  # train counts (</s>: number of lines; <unk>: merged tokens)

    @property
    def size(self) -> int:
        """|V|: the number of predictable types (softmax width)."""
        return len(self.words)

    @property
    def eos_id(self) -> int:
        return 0

    @property
    def unk_id(self) -> int:
        return 1

    @property
    def bos_id(self) -> int:
        return len(self.words)

    def ids(self, tokens: Iterable[str]) -> list[int]:
        """Text tokens -> ids as `lookup_table` maps them: unknown words, and a literal `</s>` in the text, are
        `<unk>` (`</s>` is only ever the end of a line)."""
        index = self._index
        return [index.get(t, 1) for t in tokens]

    def unknown(self, counts: Mapping[str, int]) -> int:
        """How many of the tokens counted in `counts` (word -> count) `ids` maps to `<unk>`."""
        index = self._index
        return sum(count for word, count in counts.items() if word not in index)

    @property
    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_cached_index")
        if cached is None:
            cached = {w: i for i, w in enumerate(self.words) if i >= 2}
            object.__setattr__(self, "_cached_index", cached)
        return cached

    def lookup_table(self) -> tf.lookup.StaticHashTable:
        """token string -> id; unknown tokens -> <unk>. `<s>` is never looked up."""
        import tensorflow as tf  # here, so that reading a vocabulary (a binary's flag check) does not load it

        init = tf.lookup.KeyValueTensorInitializer(
            tf.constant(self.words[2:], tf.string),
            tf.range(2, self.size, dtype=tf.int64),
        )
        return tf.lookup.StaticHashTable(init, default_value=self.unk_id)

    def save(self, path: str) -> str:
        """Writes `word<TAB>train count` per line, in id order (atomically)."""
        files.write_text(path, "".join(f"{word}\t{count}\n" for word, count in zip(self.words, self.counts)))
        return path

    @classmethod
    def load(cls, path: str) -> "Vocabulary":
        if not os.path.isfile(path):
            raise corpus_lib.CorpusError(
                f"{path} does not exist; is {os.path.dirname(path) or '.'} a directory written by nplm_tf.train "
                "or nplm_tf.ngram?"
            )
        words, counts = [], []
        with open(path, encoding="utf-8") as f:
            try:
                for line in f:
                    word, count = line.rstrip("\n").split("\t")
                    counts.append(int(count))
                    words.append(word)  # last: len(words) counts the lines read whole
            except ValueError as e:  # UnicodeDecodeError included
                where = (
                    "is not UTF-8 text"
                    if isinstance(e, UnicodeDecodeError)
                    else f"line {len(words) + 1} is not word<TAB>count"
                )
                raise corpus_lib.CorpusError(
                    f"{path} {where}; it was changed after it was written: restore it, or start again in a new "
                    "directory."
                ) from None
        if words[:2] != [EOS, UNK]:
            raise corpus_lib.CorpusError(
                f"{path} does not start with {EOS} and {UNK}; it is not a vocabulary written by nplm_tf."
            )
        return cls(tuple(words), tuple(counts))


def count_split(split: corpus_lib.Split) -> tuple[collections.Counter, int, int]:
    """One streaming pass: (token counts, tokens, lines with at least one token)."""
    counts: collections.Counter = collections.Counter()
    tokens = lines = 0
    for line in split.iter_lines():
        words = corpus_lib.tokenize(line)
        if words:
            counts.update(words)
            tokens += len(words)
            lines += 1
    return counts, tokens, lines


def check_max_vocab(max_size: int) -> None:
    """A vocabulary size limit (--max_vocab) is 0 (none) or leaves at least one word beside </s> and <unk>."""
    if max_size != 0 and max_size < MIN_SIZE:
        raise UserError(f"max_vocab={max_size} must be 0 (no limit) or at least {MIN_SIZE} ({EOS}, {UNK} and a word).")


def build(split: corpus_lib.Split, min_count: int, max_size: int = 0) -> Vocabulary:
    """Keeps tokens seen at least `min_count` times in `split`, and with `max_size` > 0 only the most frequent
    of them, so that |V| (with </s> and <unk>) is at most max_size; the rest become <unk>."""
    check_max_vocab(max_size)
    counts, tokens, lines = count_split(split)
    if tokens == 0:
        raise corpus_lib.CorpusError(f"the {split.name} split has no tokens; give it some text.")
    for reserved in (EOS, UNK, BOS):
        if reserved in counts:
            counts.pop(reserved)  # a literal "<unk>" in the text is just unknown
    kept = sorted(((w, c) for w, c in counts.items() if c >= min_count), key=lambda wc: (-wc[1], wc[0]))
    if not kept:
        most = max(counts.values(), default=0)
        raise corpus_lib.CorpusError(
            f"min_count={min_count} keeps no word of the {split.name} split (its most frequent word occurs "
            f"{most:,} times); lower it."
        )
    if max_size:
        kept = kept[: max_size - 2]  # ties at the cut go by string, as the order does
    unk = tokens - sum(c for _, c in kept)
    return Vocabulary(
        (EOS, UNK) + tuple(w for w, _ in kept),
        (lines, unk) + tuple(c for _, c in kept),
    )


def check_unk_token(vocab: Vocabulary, unk_token: str) -> None:
    """A ValueError if `unk_token`, written for the words outside `vocab`, is another word of it: a text written
    so could not tell the two apart."""
    if unk_token != vocab.words[vocab.unk_id] and unk_token in vocab.words:
        raise ValueError(f"{unk_token!r} is a word of the vocabulary, so it cannot stand for the words outside it.")


def write_splits(corpus: corpus_lib.Corpus, vocab: Vocabulary, directory: str, unk_token: str) -> None:
    """Writes DIR/train.txt, valid.txt and test.txt: each split as `ids` maps it, one unit a line (units without a
    token left out, as training leaves them), a token outside the vocabulary written as `unk_token`, for another
    toolkit (`pipelines.describe --write_text`); all three files or none. `check_unk_token` first."""
    check_unk_token(vocab, unk_token)
    words = list(vocab.words)
    words[vocab.unk_id] = unk_token
    made, written = files.make_directories(directory), []
    try:
        for name in corpus_lib.SPLITS:
            path = os.path.join(directory, f"{name}.txt")
            with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
                for line in corpus[name].iter_lines():
                    tokens = corpus_lib.tokenize(line)
                    if tokens:
                        f.write(" ".join(words[i] for i in vocab.ids(tokens)) + "\n")
            written.append(path)
    except BaseException:  # the three files or none: those written here are removed, nothing else
        for path in written:
            os.remove(path)
        files.remove_empty_directories(made)
        raise


def corpus_summary(corpus: corpus_lib.Corpus, vocab: Vocabulary, shortlists: list[int] = ()) -> dict:
    """`pipelines.describe`'s figures of a corpus under `vocab`: predicted tokens, lines and OOV rate per split,
    and with `shortlists` the share of each split's tokens each short list of N ids leaves to its tail."""
    summary = {"corpus": corpus.name, "vocab_size": vocab.size, "tokens": {}, "lines": {}, "oov_rate": {}}
    if shortlists:
        summary["tail_share"] = {str(n): {} for n in shortlists}
    for name in corpus_lib.SPLITS:
        counts, tokens, lines = count_split(corpus[name])
        unknown = vocab.unknown(counts)  # a literal </s> or <unk> in the text too, as in training
        predicted = tokens + lines  # every line also predicts </s>
        summary["tokens"][name] = predicted
        summary["lines"][name] = lines
        summary["oov_rate"][name] = unknown / predicted if tokens else 0.0
        if shortlists:
            ids = vocab.ids(counts)  # as training maps them: unknown words (in the list) are <unk>
            for n in shortlists:
                tail = sum(c for i, c in zip(ids, counts.values()) if i >= n)
                summary["tail_share"][str(n)][name] = tail / predicted if tokens else 0.0
    return summary
