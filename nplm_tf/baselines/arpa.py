"""The ARPA back-off format (KenLM, SRILM) of an interpolated Kneser-Ney model."""

from __future__ import annotations

import numpy as np

from nplm_tf.baselines import kneser_ney as kn
from pipelines import files
from pipelines import vocabulary as vocab_lib


def write_arpa(model: kn.KneserNey, vocab: vocab_lib.Vocabulary, path: str) -> str:
    """The model in ARPA format: log10 p(w | h), the n-gram, log10 γ of it as a context."""
    words = np.array(list(vocab.words) + [vocab_lib.BOS], dtype=object)
    with files.atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\n\\data\\\n")
        for k in range(1, model.order + 1):
            f.write(f"ngram {k}={model.orders[k].keys.size}\n")
        for k in range(1, model.order + 1):
            o = model.orders[k]
            f.write(f"\n\\{k}-grams:\n")
            columns = [o.word]
            g = o.context
            for j in range(k - 1, 0, -1):  # follow context links to spell the n-gram
                columns.insert(0, model.orders[j].word[g])
                g = model.orders[j].context[g]
            text = words[columns[0]]
            for col in columns[1:]:
                text = text + " " + words[col]
            with np.errstate(divide="ignore"):
                logp = np.where(o.prob > 0, np.log10(np.maximum(o.prob, 1e-300)), -99.0)
                backoff = np.log10(o.backoff)
            if k < model.order:
                rows = (f"{p:.7g}\t{t}\t{b:.7g}\n" for p, t, b in zip(logp, text, backoff))
            else:
                rows = (f"{p:.7g}\t{t}\n" for p, t in zip(logp, text))
            f.writelines(rows)
        f.write("\n\\end\\\n")
    return path
