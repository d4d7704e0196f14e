"""Reading an ARPA file, the text: its header and sections read as bytes, a chunk of lines at a time, into one
sorted table per order (`arpa_tables`); n-grams whose context or suffix is not yet listed are held for
`arpa_close`."""

from __future__ import annotations

import itertools

import numpy as np

from nplm_tf.baselines import arpa_tables
from nplm_tf.baselines.arpa_tables import MISSING_LOG10, Table


class Parser(arpa_tables.TableReader):
    """Reads the file as bytes: fields are split at ASCII whitespace (tabs or spaces, as writers differ), each
    chunk of lines at once (`bytes.split`), and checked line by line in numpy (`arpa_tables.tokens_per_line`)."""

    def parse(self) -> None:
        """The file's sections into `tables`, with the n-grams whose context or suffix is unlisted `held`."""
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise arpa_tables.ArpaError(f"{self.path} cannot be read ({e.strerror}); give an ARPA file.") from None
        with f:
            counts = self._header(f)
            self.tables: list[Table | None] = [None]
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
            raise arpa_tables.ArpaError(f"{self.path} is not an ARPA file: it has no \\data\\ line at its start.")
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
            lines = self._take(f, arpa_tables.LINES_PER_CHUNK)
            if not lines:
                self.fail(f"the file ends inside its {k}-grams; it is truncated.")
            text = b"".join(lines)
            if not text.endswith(b"\n"):
                text += b"\n"
            try:
                text.decode("utf-8")
            except UnicodeDecodeError as e:
                self.fail("not UTF-8 text; give an ARPA file in UTF-8.", self.line + 1 + text.count(b"\n", 0, e.start))
            per = arpa_tables.tokens_per_line(text)
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
        """Order k's chunks as one sorted `Table`."""
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
            self.tables.append(Table(zeros, np.arange(size, dtype=np.int32), zeros - 1, prob, backoff, line))
            return
        if not chunks:
            empty = [np.zeros(0, np.int32)] * 3 + [np.zeros(0)] * 2 + [np.zeros(0, np.int64)]
            self.tables.append(Table(*empty))
            return
        fields = []
        for name in Table.FIELDS:
            fields.append(np.concatenate([c[name] for c in chunks]))
            for c in chunks:
                del c[name]  # each field's chunks freed once joined
        self.tables.append(self._sorted(Table(*fields)))
