"""Ensembles: several networks and n-grams mixed linearly, the weights fitted by EM on valid.

    P(w | h) = Σ_i λ_i(h) P_i(w | h),    Σ_i λ_i(h) = 1,

with the λ_i uniform, fitted once by EM over the valid split, or fitted per bucket of the context's train
frequency (as the two-model mixture, `baselines.mixture`; the buckets read the first n-gram's counts). A
mixture of normalized distributions is normalized, so perplexity stays exact. The networks are scored in NumPy
(`inference.network`), each once per split, so k networks cost about k times one; no TensorFlow. Caches of the
text so far (`baselines.cache`) can be members too; a fit that holds one is for evaluation only, since what
serves a fit (`LanguageModel`, the SavedModel) keeps n-gram states.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import cache as cache_lib
from nplm_tf.baselines import mixture, network_mixture
from nplm_tf.baselines.ngram_arrays import TokenArrays
from nplm_tf.core import run_dir as run_dir_lib
from nplm_tf.core.run_dir import RunDir
from nplm_tf.inference.network import NumpyNetwork
from pipelines import corpus as corpus_lib
from pipelines import files
from pipelines import vocabulary as vocab_lib
from pipelines.errors import UserError

NUM_BUCKETS = network_mixture.NUM_BUCKETS


@dataclasses.dataclass
class Members:
    """The ensemble's models, all over one vocabulary: networks (model directories), n-grams, then caches."""

    vocab: vocab_lib.Vocabulary
    model_dirs: list[str]
    ngram_dirs: list[str]
    networks: list[NumpyNetwork]
    ngrams: list
    caches: list[cache_lib.UnigramCache] = dataclasses.field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return self.model_dirs + self.ngram_dirs + [c.name for c in self.caches]

    @property
    def kinds(self) -> list[str]:
        return ["network"] * len(self.networks) + ["ngram"] * len(self.ngrams) + ["cache"] * len(self.caches)

    @classmethod
    def check(cls, model_dirs: list[str], ngram_dirs: list[str]) -> vocab_lib.Vocabulary:
        """The shared vocabulary, or one sentence naming the member whose vocabulary differs; nothing loaded."""
        for directory in model_dirs:
            run_dir_lib.check_trained(directory)
        vocab = RunDir(model_dirs[0]).load_vocab()
        for directory in model_dirs[1:]:
            other = RunDir(directory).load_vocab()
            if other.words != vocab.words:
                raise UserError(
                    f"{directory} has another vocabulary ({other.size:,} types) than {model_dirs[0]} "
                    f"({vocab.size:,}); an ensemble's networks share one: train them with the same corpus, "
                    "--min_count and --max_vocab."
                )
        for directory in ngram_dirs:
            network_mixture.check_same_vocabulary(vocab, directory)
        return vocab

    @classmethod
    def load(cls, model_dirs: list[str], ngram_dirs: list[str], cache_decays=(), cache_window=cache_lib.WINDOW):
        """The members; `cache_decays`: one cache of the text so far for each decay (`cache_window`: its words
        where the text marks no documents)."""
        vocab = cls.check(model_dirs, ngram_dirs)
        networks = [NumpyNetwork.load(d) for d in model_dirs]
        ngrams = [ngram_lib.load(d) for d in ngram_dirs]
        caches = [cache_lib.UnigramCache(d, vocab.size, cache_window) for d in cache_decays]
        return cls(vocab, list(model_dirs), list(ngram_dirs), networks, ngrams, caches)

    def score(self, split: corpus_lib.Split) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
        """P of every predicted token of `split` under each member, (k, T) in the members' order; each token's
        context-frequency bucket (the first n-gram's counts; None without one); the tokens' ids."""
        lines = ngram_lib.id_lines(split, self.vocab)
        rows = [np.exp(network.line_log_probs(lines)) for network in self.networks]
        arrays = TokenArrays.from_lines(lines, self.vocab.bos_id, self.vocab.eos_id)
        rows += [model.token_probabilities(arrays) for model in self.ngrams]
        if self.caches:  # each sees its document so far, or the last words where the text marks no documents
            documents = corpus_lib.unit_documents(split)
            rows += [cache.text_probabilities(arrays, documents) for cache in self.caches]
        buckets = None
        if self.ngrams:
            buckets = mixture.frequency_buckets(self.ngrams[0].context_counts(arrays), NUM_BUCKETS)
        return np.stack(rows), buckets, arrays.tokens[arrays.predicted].tolist()


def fit_and_score(members: Members, valid: corpus_lib.Split, split: corpus_lib.Split) -> tuple[dict, np.ndarray, list]:
    """Fits the weights on `valid` and scores `split`: the report, the ensemble's P per token of `split` (the
    context-frequency weights where there is an n-gram, else the global EM weights), and the tokens' ids."""
    return fit_scored(members, members.score(valid), members.score(split))


def fit_scored(
    members: Members, valid: tuple, scored: tuple, keep: list[int] | None = None
) -> tuple[dict, np.ndarray, list]:
    """`fit_and_score` over `Members.score`'s results for valid and the scored split, each scored once; `keep`:
    the ensemble of only these members (indices in `members.names`), fitted anew."""
    valid_probs, valid_buckets, _ = valid
    probs, buckets, ids = scored
    keep = list(range(len(members.names))) if keep is None else list(keep)
    valid_probs, probs = valid_probs[keep], probs[keep]
    kinds, first_cache = members.kinds, len(members.networks) + len(members.ngrams)
    if not any(kinds[i] == "ngram" for i in keep):
        valid_buckets = buckets = None  # the buckets are an n-gram's counts: without one, the global weights
    names = [members.names[i] for i in keep]
    k = probs.shape[0]
    weights, trace = mixture.em_weights(valid_probs)
    report = {
        "members": [
            {
                "model": names[j],
                "kind": kinds[i],
                "perplexity": ngram_lib.perplexity(probs[j]),
            }
            for j, i in enumerate(keep)
        ],
        "uniform": {
            "weights": [1.0 / k] * k,
            "perplexity": ngram_lib.perplexity(mixture.mix(probs, np.full(k, 1.0 / k))),
        },
        "em": {
            "weights": weights.tolist(),
            "perplexity": ngram_lib.perplexity(mixture.mix(probs, weights)),
            "valid_log_likelihood": trace[-1],
        },
        "tokens": int(probs.shape[1]),
    }
    best = mixture.mix(probs, weights)
    if buckets is not None:
        per_bucket = mixture.bucket_em_weights(valid_probs, valid_buckets, NUM_BUCKETS)
        best = mixture.mix(probs, per_bucket[buckets])
        report["context_frequency"] = {
            "buckets": "0: unseen context; b >= 1: train count in [2^(b-1), 2^b) (the first n-gram's)",
            "weights": per_bucket.tolist(),
            "perplexity": ngram_lib.perplexity(best),
        }
    report["fit"] = {
        "model_dirs": [os.path.abspath(members.names[i]) for i in keep if kinds[i] == "network"],
        "ngram_dirs": [os.path.abspath(members.names[i]) for i in keep if kinds[i] == "ngram"],
        "cache_decays": [members.caches[i - first_cache].decay for i in keep if kinds[i] == "cache"],
        "em": weights.tolist(),
        "context_frequency": report.get("context_frequency", {}).get("weights"),
    }
    return report, best, ids


def read_fit(path: str) -> tuple[dict, np.ndarray]:
    """A fit `save_fit` wrote, checked: (the fit, its weights (buckets or 1, members), the members in order: the
    networks, then the n-grams). Nothing of the members is loaded."""
    fit = files.read_json(path)
    if not isinstance(fit, dict) or not isinstance(fit.get("model_dirs"), list) or "em" not in fit:
        raise UserError(f"{path} is no ensemble's fit; write one with nplm_tf.evaluate --model_dirs --save_ensemble.")
    fit.setdefault("ngram_dirs", [])
    if fit.get("cache_decays"):
        raise UserError(
            f"{path} mixes in a cache of the text so far, which a served model cannot keep (its state is the last "
            "n − 1 words); fit the ensemble again without --cache to serve it."
        )
    members = len(fit["model_dirs"]) + len(fit["ngram_dirs"] or [])
    if len(fit["em"]) != members:
        raise UserError(f"{path} holds {len(fit['em'])} weights for {members} models; fit it again.")
    per_bucket = fit.get("context_frequency")
    return fit, np.array(per_bucket if per_bucket else [fit["em"]], np.float64)


def save_fit(path: str, fit: dict) -> None:
    """A `fit_and_score` report's "fit" (the members and their weights) as JSON at `path`, written atomically:
    what `LanguageModel` reads."""
    files.write_json(path, fit)
