"""Reading an ARPA file, the closing: the held n-grams and the blanks they need added, the file's words outside
the vocabulary merged into `<unk>`, and the tables made a `KneserNey` (the rules: docs/ngram_import.md)."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines import arpa_parse
from nplm_tf.baselines import kneser_ney as kn
from nplm_tf.baselines.arpa_tables import MISSING_LOG10, PARSE_BASE, Table


class Reader(arpa_parse.Parser):
    """An ARPA file read (`Parser.parse`) and closed into a model over the vocabulary."""

    def read(self) -> tuple[kn.KneserNey, list]:
        self.parse()
        self._resolve_held()
        if self.outside:
            self._merge_outside()
        return self._model(), self.warnings

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
            added = Table(
                context,
                np.array([r[0][-1] for r in rows], np.int64),
                suffix,
                prob,
                np.array([r[2] for r in rows]),
                np.array([r[3] for r in rows], np.int64),
            )
            self._replace(k, Table.concat(self.tables[k], added))
        if blanks:
            self.warnings.append(
                f"{blanks} n-grams the file uses as a context or suffix but does not list were added with the "
                "probability back-off gives them and back-off weight 1 (what the file means)"
            )

    def _merge_outside(self) -> None:
        """The file's words outside the vocabulary (S with `<unk>`) become `<unk>`: P(<unk> | h) = Σ_{w∈S} P(w | h)
        = M(h), where M(h) = Δ(h) + β(h)·M(h′) and Δ(h) = Σ over the S words listed after h of p(hw) − β(h)·P(w | h′),
        the recursion a short list's mass follows (`kn_short_list.short_list_tables`)."""
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
            added = Table(
                contexts,
                np.full(contexts.size, unk, np.int64),
                suffix,
                m[contexts],
                np.ones(contexts.size),
                np.zeros(contexts.size, np.int64),
            )
            table = Table.concat(t, added)
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
