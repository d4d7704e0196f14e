"""The ARPA back-off format (KenLM, SRILM) of an interpolated Kneser-Ney model."""

from __future__ import annotations

import itertools

import numpy as np

from nplm_tf.baselines import kneser_ney as kn
from pipelines import files
from pipelines import vocabulary as vocab_lib

ROWS_PER_CHUNK = 1 << 18
DIGITS = 12  # significant digits of each log10: the probabilities survive the text round trip (1e-9 in ln P)


def write_arpa(
    model: kn.KneserNey, vocab: vocab_lib.Vocabulary, path: str, rows_per_chunk: int = ROWS_PER_CHUNK
) -> str:
    """The model in ARPA format: log10 p(w | h), the n-gram, log10 γ of it as a context.

    Each order is spelled and formatted `rows_per_chunk` n-grams at a time, so the
    text held at once is one chunk's, not an order's (millions of Python strings on
    a large corpus); the file is the same for every chunk size."""
    if rows_per_chunk < 1:
        raise ValueError(f"rows_per_chunk={rows_per_chunk} must be positive.")
    words = np.array(list(vocab.words) + [vocab_lib.BOS], dtype=object)
    with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\n\\data\\\n")
        for k in range(1, model.order + 1):
            f.write(f"ngram {k}={model.orders[k].keys.size}\n")
        for k in range(1, model.order + 1):
            f.write(f"\n\\{k}-grams:\n")
            for start in range(0, model.orders[k].keys.size, rows_per_chunk):
                f.writelines(_rows(model, words, k, slice(start, start + rows_per_chunk)))
        f.write("\n\\end\\\n")
    return path


def _rows(model: kn.KneserNey, words: np.ndarray, k: int, rows: slice):
    """The ARPA lines of order k's n-grams `rows`.

    Formatted from Python lists, not numpy scalars (numpy floats format slower, and so does numpy's
    element-wise string concatenation): the same text, faster."""
    o = model.orders[k]
    columns = [o.word[rows]]
    g = o.context[rows]
    for j in range(k - 1, 0, -1):  # follow context links to spell the n-gram
        columns.insert(0, model.orders[j].word[g])
        g = model.orders[j].context[g]
    spelled = zip(*(words[column].tolist() for column in columns))
    prob = o.prob[rows]
    with np.errstate(divide="ignore"):
        logp = np.where(prob > 0, np.log10(np.maximum(prob, 1e-300)), -99.0).tolist()
        backoff = np.log10(o.backoff[rows]).tolist()
    if k < model.order:
        return (f"{p:.{DIGITS}g}\t{' '.join(t)}\t{b:.{DIGITS}g}\n" for p, t, b in zip(logp, spelled, backoff))
    return (f"{p:.{DIGITS}g}\t{' '.join(t)}\n" for p, t in zip(logp, spelled))


# ---------------------------------------------------------------- reading --

MISSING_LOG10 = -100.0  # log10 P of a model word the file lacks (KenLM's for a file without <unk>)
PARSE_BASE = 1 << 24  # keys while reading: context * PARSE_BASE + word, room for words outside the vocabulary
LINES_PER_CHUNK = 1 << 16


class ArpaError(kn.NgramError):
    """The ARPA file cannot be read, or not as a model over the given vocabulary."""


def read_arpa(path: str, vocab: vocab_lib.Vocabulary, unk_token: str = vocab_lib.UNK) -> tuple[kn.KneserNey, list]:
    """A back-off model in ARPA format (KenLM's lmplz, SRILM, IRSTLM, `write_arpa`), as a `KneserNey` over
    `vocab` that every n-gram consumer reads unchanged: `prob` is P(w | h) of each listed n-gram, `backoff` β(h).

    The file is streamed: n-grams are kept as arrays, `LINES_PER_CHUNK` lines of text at a time. The rules
    (docs/ngram_import.md):
      - `unk_token` is the file's spelling of the model's `<unk>`; `<s>` is a context only.
      - An n-gram whose context or suffix the file does not list gets that (n-1)-gram as a "blank", with the
        probability back-off gives it and β = 1: what the file means, in a closed trie.
      - Words of the file outside `vocab` that it only predicts (lmplz's own `<unk>` beside a text whose unknown
        words were spelled `unk_token`) are added to `<unk>`: P(<unk> | h) = Σ of their P(w | h), exactly, so
        every distribution stays normalized over `vocab`. One used in a context is refused.
      - A word of `vocab` the file lacks has log10 P = MISSING_LOG10 in every context, as KenLM gives one.
    Returns the model (counts zero until `attach_counts`) and the warnings to print.
    """
    return _Reader(path, vocab, unk_token).read()


def attach_counts(model: kn.KneserNey, train: kn.TokenArrays) -> None:
    """Train counts an ARPA file does not hold, for what reads them (the mixture's λ buckets read the count of
    each context, `context_totals`): each order's n-grams counted in `train`, and the top order's contexts'
    totals, those of n-grams the file pruned included."""
    ids, below = train.tokens, None  # ids of the k-grams (and (k-1)-grams) ending at each position, -1: none
    for k in range(1, model.order + 1):
        if k > 1:
            below, ids = ids, model.extend_ids(ids, train, k)
        o = model.orders[k]
        valid = (ids >= 0) & train.predicted
        o.raw = np.bincount(ids[valid], minlength=o.keys.size).astype(np.float64)
        o.count = o.raw if k == model.order else np.zeros(o.keys.size)
    if model.order > 1:
        lower, top = model.orders[model.order - 1], model.orders[model.order]
        context = np.where(train.offset >= model.order - 1, np.roll(below, 1), -1)
        seen = (context >= 0) & train.predicted
        totals = np.bincount(context[seen], minlength=lower.keys.size).astype(np.float64)
        lower.pruned = totals - np.bincount(top.context, weights=top.count, minlength=lower.keys.size)
        top.pruned = np.zeros(top.keys.size)


class _Table:
    """One order's n-grams while reading: sorted keys (context row * PARSE_BASE + word) and their fields."""

    FIELDS = ("context", "word", "suffix", "prob", "backoff", "line")

    def __init__(self, context, word, suffix, prob, backoff, line):
        self.context, self.word, self.suffix = context, word, suffix
        self.prob, self.backoff, self.line = prob, backoff, line
        self.keys = context.astype(np.int64) * PARSE_BASE + word

    def take(self, rows: np.ndarray) -> "_Table":
        """The n-grams `rows` (indices or a mask), in that order."""
        return _Table(*(getattr(self, name)[rows] for name in self.FIELDS))

    @classmethod
    def concat(cls, a: "_Table", b: "_Table") -> "_Table":
        return cls(*(np.concatenate([getattr(a, name), getattr(b, name)]) for name in cls.FIELDS))

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        if self.keys.size == 0:
            return np.full(keys.shape, -1, np.int64)
        where = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return np.where((self.keys[where] == keys) & (keys >= 0), where, -1)


def _tokens_per_line(text: bytes) -> np.ndarray:
    """The number of fields (runs of bytes between ASCII whitespace, as `bytes.split` finds them) on each line
    of `text`, which ends with a newline."""
    a = np.frombuffer(text, np.uint8)
    sep = (a == 32) | ((a >= 9) & (a <= 13))
    start = np.empty(a.size, bool)
    start[0] = not sep[0]
    np.greater(sep[:-1], sep[1:], out=start[1:])
    ends = np.flatnonzero(a == 10)
    return np.add.reduceat(start, np.concatenate([[0], ends[:-1] + 1]), dtype=np.int32)


class _Reader:
    """Reads the file as bytes: fields are split at ASCII whitespace (tabs or spaces, as writers differ), each
    chunk of lines at once (`bytes.split`), and checked line by line in numpy (`_tokens_per_line`)."""

    def __init__(self, path: str, vocab: vocab_lib.Vocabulary, unk_token: str):
        vocab_lib.check_unk_token(vocab, unk_token)
        self.path, self.vocab, self.unk_token = path, vocab, unk_token
        self.index = {w.encode("utf-8"): i for i, w in enumerate(vocab.words)}
        if unk_token != vocab_lib.UNK:
            del self.index[vocab_lib.UNK.encode()]
            self.index[unk_token.encode("utf-8")] = vocab.unk_id
        self.index[vocab_lib.BOS.encode()] = vocab.bos_id
        self.outside: list[str] = []  # words of the file outside the vocabulary, ids bos_id + 1 ...
        self.warnings: list[str] = []
        self.line = 0  # lines consumed
        self.pushed: list[bytes] = []  # lines read ahead and given back

    def fail(self, what: str, line: int | None = None) -> None:
        raise ArpaError(f"{self.path} line {line or self.line}: {what}")

    # ------------------------------------------------------------ parsing --

    def read(self) -> tuple[kn.KneserNey, list]:
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise ArpaError(f"{self.path} cannot be read ({e.strerror}); give an ARPA file.") from None
        with f:
            counts = self._header(f)
            self.tables: list[_Table | None] = [None]
            self.held: list[list[tuple]] = [[] for _ in range(len(counts) + 1)]
            pending = self._next_content(f)
            for k in range(1, len(counts) + 1):
                if pending is None:
                    self.fail(f"the file ends before its \\{k}-grams: section; it is truncated.")
                if pending.strip() != f"\\{k}-grams:".encode():
                    self.fail(f"expected \\{k}-grams:, found {self._text(pending.strip()[:40])!r}.")
                pending = self._section(f, k, len(counts), counts[k - 1])
            if pending is None:
                self.fail("the file ends without \\end\\; it is truncated.")
            if pending.strip() != b"\\end\\":
                self.fail(
                    f"expected \\end\\ after the {len(counts)}-grams, found {self._text(pending.strip()[:40])!r}."
                )
        self._resolve_held()
        if self.outside:
            self._merge_outside()
        return self._model(), self.warnings

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("not UTF-8 text; give an ARPA file in UTF-8.")

    def _readline(self, f) -> bytes | None:
        line = self.pushed.pop() if self.pushed else f.readline()
        if not line:
            return None
        self.line += 1
        return line

    def _take(self, f, count: int) -> list[bytes]:
        """Up to `count` lines, not yet consumed (`self.line` counts them as they are used)."""
        lines = self.pushed[::-1][:count]
        del self.pushed[len(self.pushed) - len(lines) :]
        lines += itertools.islice(f, count - len(lines))
        return lines

    def _next_content(self, f) -> bytes | None:
        while (line := self._readline(f)) is not None:
            if line.strip():
                return line
        return None

    def _header(self, f) -> list[int]:
        line = self._next_content(f)
        while line is not None and line.strip() != b"\\data\\":
            if self.line > 1000 or line.lstrip().startswith(b"\\"):
                break
            line = self._next_content(f)  # tools may write comments before \data\
        if line is None or line.strip() != b"\\data\\":
            raise ArpaError(f"{self.path} is not an ARPA file: it has no \\data\\ line at its start.")
        counts = []
        while (line := self._readline(f)) is not None and line.strip():
            field = self._text(line.strip())
            name, _, value = field.partition("=")
            parts = name.split()
            if len(parts) != 2 or parts[0] != "ngram" or not parts[1].isdigit() or not value.strip().isdigit():
                self.fail(f"{field[:40]!r} is not a count line `ngram K=COUNT`.")
            if int(parts[1]) != len(counts) + 1:
                self.fail(f"expected the count of order {len(counts) + 1}, found order {parts[1]}.")
            counts.append(int(value))
        if not counts:
            self.fail("\\data\\ gives no `ngram K=COUNT` line.")
        return counts

    def _section(self, f, k: int, order: int, expected: int) -> bytes | None:
        """Reads the k-grams up to the line after them (returned); checks their number against \\data\\."""
        header, rows, chunks = self.line, 0, []
        fields, most = k + 1, k + 2 if k < order else k + 1
        while True:
            lines = self._take(f, LINES_PER_CHUNK)
            if not lines:
                self.fail(f"the file ends inside its {k}-grams; it is truncated.")
            text = b"".join(lines)
            if not text.endswith(b"\n"):
                text += b"\n"
            try:
                text.decode("utf-8")
            except UnicodeDecodeError as e:
                self.fail("not UTF-8 text; give an ARPA file in UTF-8.", self.line + 1 + text.count(b"\n", 0, e.start))
            per = _tokens_per_line(text)
            off = np.flatnonzero((per < fields) | (per > most))
            stop = int(off[0]) if off.size else len(lines)
            if stop:
                tokens = text.split()
                if stop < len(lines):
                    del tokens[int(per[:stop].sum()) :]
                chunks.append(self._chunk(k, self.line + 1, tokens, per[:stop]))
                rows += stop
            self.line += stop
            if stop == len(lines):
                continue
            self.pushed += lines[stop + 1 :][::-1]  # before any still pushed: read back first
            self.line += 1
            if per[stop] == 0:  # a blank line ends the section
                pending = self._next_content(f)
            elif lines[stop].lstrip().startswith(b"\\"):
                pending = lines[stop]
            else:
                want = f"{fields} or {most}" if most > fields else str(fields)
                beta = ", log10 β" if most > fields else ""
                self.fail(f"{per[stop]} fields where a {k}-gram line has {want} (log10 p, {k} words{beta}).")
            break
        if rows != expected:
            self.fail(f"\\{k}-grams: lists {rows:,} n-grams, but \\data\\ says ngram {k}={expected:,}.", header)
        self._finish(k, chunks)
        return pending

    def _numbers(self, values: list[bytes], first: int, what: str) -> np.ndarray:
        try:
            array = np.fromiter(map(float, values), np.float64, len(values))
        except ValueError:
            for i, v in enumerate(values):
                try:
                    float(v)
                except ValueError:
                    self.fail(f"{what} {self._text(v[:30])!r} is not a number.", first + i)
        nan = np.flatnonzero(np.isnan(array))
        if nan.size:
            self.fail(f"{what} is not a number (nan).", first + int(nan[0]))
        return array

    def _ids(self, words: list[bytes]) -> np.ndarray:
        get = self.index.get
        ids = np.fromiter(map(get, words, itertools.repeat(-1)), np.int64, len(words))
        for i in np.flatnonzero(ids < 0):
            word = words[i]
            if word not in self.index:
                self.index[word] = self.vocab.bos_id + 1 + len(self.outside)
                self.outside.append(word.decode("utf-8"))
            ids[i] = self.index[word]
        return ids

    def _chunk(self, k: int, first: int, tokens: list[bytes], per: np.ndarray) -> dict:
        """The lines' n-grams (`per` fields each, `tokens` all their fields in order) as arrays: for k >= 2,
        their context and suffix rows in the tables below (finished), or held back where one is unlisted."""
        fields = k + 1
        if (per == per[0]).all():  # one layout throughout: every field a stride of the flat list
            width = int(per[0])
            column = lambda j: tokens[j::width]  # noqa: E731
            backoffs = tokens[fields::width] if width > fields else None
        else:  # some lines without a back-off (SRILM leaves out β = 1)
            offsets = np.concatenate([[0], np.cumsum(per[:-1])])
            flat = np.array(tokens, dtype=object)
            column = lambda j: flat[offsets + j].tolist()  # noqa: E731
            backoffs = np.where(per > fields, flat[np.minimum(offsets + fields, flat.size - 1)], b"0").tolist()
        probs = column(0)
        logp = self._numbers(probs, first, "the log10 probability")
        positive = np.flatnonzero(logp > 0)
        if positive.size:
            self.fail(f"the log10 probability {self._text(probs[positive[0]])} is positive.", first + int(positive[0]))
        logb = np.zeros(len(probs)) if backoffs is None else self._numbers(backoffs, first, "the log10 back-off")
        infinite = np.flatnonzero(~np.isfinite(logb))
        if infinite.size:
            i = int(infinite[0])
            self.fail(f"the log10 back-off {self._text(backoffs[i])} is not finite.", first + i)
        ids = np.stack([self._ids(column(j)) for j in range(1, fields)], axis=1)
        line = np.arange(first, first + ids.shape[0], dtype=np.int64)
        bos = self.vocab.bos_id
        if k > 1:
            in_context = np.flatnonzero((ids[:, :-1] > bos).any(axis=1))
            if in_context.size:
                i = int(in_context[0])
                word = next(self.outside[w - bos - 1] for w in ids[i, :-1] if w > bos)
                self.fail(
                    f"{word!r}, a word outside the model's vocabulary, is in a context; build the ARPA file from "
                    "the text `python -m pipelines.describe --write_text=DIR` writes (the model's words, the others "
                    "spelled --unk_token), or train the model on the file's vocabulary.",
                    first + i,
                )
            predicts_bos = ids[:, -1] == bos
            if predicts_bos.any():
                self.warnings.append(
                    f"{int(predicts_bos.sum())} {k}-grams predict <s>, which is a context only: left out"
                )
                keep = ~predicts_bos
                ids, logp, logb, line = ids[keep], logp[keep], logb[keep], line[keep]
        with np.errstate(under="ignore"):
            chunk = {"prob": np.power(10.0, logp), "backoff": np.power(10.0, logb), "line": line}
        if k == 1:
            chunk["ids"] = ids
            return chunk
        context, suffix = self._prefix_ids(ids[:, :-1]), self._prefix_ids(ids[:, 2:], first=ids[:, 1])
        ok = (context >= 0) & (suffix >= 0)
        for i in np.flatnonzero(~ok):
            self.held[k].append(
                (tuple(int(w) for w in ids[i]), float(chunk["prob"][i]), float(chunk["backoff"][i]), int(line[i]))
            )
        if not ok.all():
            chunk = {name: value[ok] for name, value in chunk.items()}
        chunk |= {
            "context": context[ok].astype(np.int32),
            "word": ids[ok, -1].astype(np.int32),
            "suffix": suffix[ok].astype(np.int32),
        }
        return chunk

    def _finish(self, k: int, chunks: list[dict]) -> None:
        """Order k's chunks as one sorted `_Table`."""
        if k == 1:
            ids = np.concatenate([c["ids"] for c in chunks])[:, 0] if chunks else np.zeros(0, np.int64)
            cat = {
                n: np.concatenate([c[n] for c in chunks]) if chunks else np.zeros(0)
                for n in ("prob", "backoff", "line")
            }
            size = self.vocab.bos_id + 1 + len(self.outside)
            prob = np.full(size, 10.0**MISSING_LOG10)
            backoff, line, listed = np.ones(size), np.zeros(size, np.int64), np.zeros(size, bool)
            order = np.argsort(ids, kind="stable")
            self._check_unique(ids[order], cat["line"][order])
            prob[ids], backoff[ids], line[ids], listed[ids] = cat["prob"], cat["backoff"], cat["line"], True
            prob[self.vocab.bos_id] = 0.0
            self.listed_unigrams = listed
            zeros = np.zeros(size, np.int32)
            self.tables.append(_Table(zeros, np.arange(size, dtype=np.int32), zeros - 1, prob, backoff, line))
            return
        if not chunks:
            empty = [np.zeros(0, np.int32)] * 3 + [np.zeros(0)] * 2 + [np.zeros(0, np.int64)]
            self.tables.append(_Table(*empty))
            return
        fields = []
        for name in _Table.FIELDS:
            fields.append(np.concatenate([c[name] for c in chunks]))
            for c in chunks:
                del c[name]  # each field's chunks freed once joined
        self.tables.append(self._sorted(_Table(*fields)))

    def _prefix_ids(self, words: np.ndarray, first: np.ndarray | None = None) -> np.ndarray:
        """Rows of the n-grams `words` (columns oldest first) in their order's table, -1 where one is unlisted;
        `first`, the suffix's first word (the columns then being the rest)."""
        if first is None:
            g, rest = words[:, 0], words[:, 1:]
        else:
            g, rest = first, words
        g = g.copy()
        for j in range(rest.shape[1]):
            g = self.tables[j + 2].lookup(np.where(g >= 0, g * PARSE_BASE + rest[:, j], -1))
        return g

    def _sorted(self, table: _Table, order: np.ndarray | None = None) -> _Table:
        """`table` sorted by key (`order`: its argsort, when the caller has it), refused where a key repeats."""
        sorted_table = table.take(np.argsort(table.keys, kind="stable") if order is None else order)
        self._check_unique(sorted_table.keys, sorted_table.line)
        return sorted_table

    def _check_unique(self, keys: np.ndarray, lines: np.ndarray) -> None:
        """Refuses the first n-gram listed twice (`keys` sorted, `lines` in their order)."""
        repeated = np.flatnonzero(keys[1:] == keys[:-1])
        if repeated.size:
            i = int(repeated[0])
            first, second = sorted(int(x) for x in lines[i : i + 2])
            self.fail(f"the n-gram of line {first} is listed again.", second)

    # ----------------------------------------------------------- closing --

    def _find(self, k: int, words: tuple) -> int:
        g = words[0]
        for j in range(2, k + 1):
            if g < 0:
                return -1
            g = int(self.tables[j].lookup(np.array([g * PARSE_BASE + words[j - 1]]))[0])
        return g

    def _resolve_held(self) -> None:
        """Adds every held n-gram and the blanks it needs (its unlisted context and suffix, recursively)."""
        order = len(self.tables) - 1
        need = [set() for _ in range(order + 1)]  # blanks to add per order, as word tuples
        held = [{h[0] for h in rows} for rows in self.held]
        for k in range(order, 1, -1):
            for words in sorted(held[k] | need[k]):
                for part in (words[:-1], words[1:]):
                    if len(part) > 1 and part not in held[k - 1] and self._find(k - 1, part) < 0:
                        need[k - 1].add(part)
        blanks = 0
        for k in range(2, order + 1):
            rows = [(w, None, 1.0, 0) for w in sorted(need[k])] + self.held[k]
            if not rows:
                continue
            blanks += len(need[k])
            context = np.array([self._find(k - 1, r[0][:-1]) for r in rows], np.int64)
            suffix = np.array([self._find(k - 1, r[0][1:]) for r in rows], np.int64)
            lower = self.tables[k - 1]
            prob = np.array(
                [lower.backoff[c] * lower.prob[s] if r[1] is None else r[1] for r, c, s in zip(rows, context, suffix)]
            )
            added = _Table(
                context,
                np.array([r[0][-1] for r in rows], np.int64),
                suffix,
                prob,
                np.array([r[2] for r in rows]),
                np.array([r[3] for r in rows], np.int64),
            )
            self._replace(k, _Table.concat(self.tables[k], added))
        if blanks:
            self.warnings.append(
                f"{blanks} n-grams the file uses as a context or suffix but does not list were added with the "
                "probability back-off gives them and back-off weight 1 (what the file means)"
            )

    def _replace(self, k: int, table: _Table, keep: np.ndarray | None = None) -> np.ndarray:
        """Order k becomes `table` (rows `keep` of it), sorted; order k+1's contexts and suffixes follow.
        Returns each old row's new one (-1: dropped)."""
        if keep is not None:
            table = table.take(keep)
        order = np.argsort(table.keys, kind="stable")
        new_row = np.full(keep.size if keep is not None else order.size, -1, np.int64)
        kept = np.flatnonzero(keep) if keep is not None else np.arange(order.size)
        new_row[kept[order]] = np.arange(order.size)
        self.tables[k] = self._sorted(table, order)
        if k + 1 < len(self.tables):
            above = self.tables[k + 1]
            self.tables[k + 1] = _Table(
                new_row[above.context], above.word, new_row[above.suffix], above.prob, above.backoff, above.line
            )
        return new_row

    def _merge_outside(self) -> None:
        """The file's words outside the vocabulary (S with `<unk>`) become `<unk>`: P(<unk> | h) = Σ_{w∈S} P(w | h)
        = M(h), where M(h) = Δ(h) + β(h)·M(h′) and Δ(h) = Σ over the S words listed after h of p(hw) − β(h)·P(w | h′),
        the recursion a short list's mass follows (`KneserNey.short_list_tables`)."""
        tables, order = self.tables, len(self.tables) - 1
        bos, unk = self.vocab.bos_id, self.vocab.unk_id
        in_s = lambda words: (words > bos) | (words == unk)  # noqa: E731
        m0 = float(tables[1].prob[in_s(tables[1].word)].sum())
        mass, has = [None], [None]  # per order j < N: M and "an S word is listed after it", per row
        for j in range(1, order):
            lower, up = tables[j], tables[j + 1]
            rows = in_s(up.word)
            own = up.prob[rows] - lower.backoff[up.context[rows]] * lower.prob[up.suffix[rows]]
            delta = np.bincount(up.context[rows], weights=own, minlength=lower.keys.size)
            back = m0 if j == 1 else mass[j - 1][lower.suffix]
            mass.append(delta + lower.backoff * back)
            has.append(np.bincount(up.context[rows], minlength=lower.keys.size) > 0)
        one = tables[1]
        one.prob[unk] = m0
        new_row = self._replace(1, one, one.word <= bos)
        for k in range(2, order + 1):
            m, h = np.zeros(tables[k - 1].keys.size), np.zeros(tables[k - 1].keys.size, bool)
            old = np.flatnonzero(new_row >= 0)
            m[new_row[old]], h[new_row[old]] = mass[k - 1][old], has[k - 1][old]
            t = tables[k]
            is_unk = t.word == unk
            t.prob[is_unk] = m[t.context[is_unk]]
            contexts = np.setdiff1d(np.flatnonzero(h), t.context[is_unk])
            if k == 2:
                suffix = np.full(contexts.size, unk, np.int64)
            else:
                suffix = tables[k - 1].lookup(tables[k - 1].suffix[contexts] * PARSE_BASE + unk)
            if (suffix < 0).any():
                raise AssertionError("a merged <unk> n-gram has no suffix; the table is not closed")
            added = _Table(
                contexts,
                np.full(contexts.size, unk, np.int64),
                suffix,
                m[contexts],
                np.ones(contexts.size),
                np.zeros(contexts.size, np.int64),
            )
            table = _Table.concat(t, added)
            new_row = self._replace(k, table, table.word <= bos)
        words = ", ".join(repr(w) for w in self.outside[:3]) + (" ..." if len(self.outside) > 3 else "")
        self.warnings.append(
            f"{len(self.outside)} words of the file are outside the model's vocabulary ({words}); their probability "
            "in every context is added to <unk>'s"
        )

    def _model(self) -> kn.KneserNey:
        vocab, tables = self.vocab, self.tables
        order = len(tables) - 1
        base = vocab.size + 1  # `KneserNey.base`: n-gram keys are context id * base + word
        orders: list[kn.Order | None] = [None]
        for k in range(1, order + 1):
            t, tables[k] = tables[k], None  # each order's reading arrays freed once the model holds its own
            keys = t.context.astype(np.int64) * base + t.word if k > 1 else np.arange(base)
            orders.append(
                kn.Order(
                    keys,
                    kn.index_array(t.context),
                    kn.index_array(t.word),
                    kn.index_array(t.suffix),
                    np.zeros(keys.size),
                    (0.0, 0.0, 0.0),
                    prob=t.prob,
                    backoff=t.backoff if k < order else np.ones(keys.size),
                )
            )
        model = kn.KneserNey(None, order, vocab.size, orders=orders)
        missing = np.flatnonzero(~self.listed_unigrams[: vocab.size])
        if missing.size:
            words = ", ".join(repr(vocab.words[i]) for i in missing[:3]) + (" ..." if missing.size > 3 else "")
            self.warnings.append(
                f"{missing.size} of the model's words are not in the file ({words}); each has log10 probability "
                f"{MISSING_LOG10:g} in every context, as KenLM gives a word its file lacks"
            )
        total = float(model.orders[1].prob[: vocab.size].sum())
        if abs(total - 1) > 1e-4:
            self.warnings.append(
                f"the unigram probabilities sum to {total:.6f} over the model's vocabulary, not 1: the file is not "
                "normalized, nor then are the distributions read from it"
            )
        return model
