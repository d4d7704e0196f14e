"""The n-gram models save and load themselves whole: every attribute, every table, bit for bit."""

import dataclasses

import numpy as np
import pytest

from nplm_tf.baselines import build as ngram_lib
from nplm_tf.baselines import interpolated
from nplm_tf.baselines import kneser_ney as kn


def data(seed, lines=50, vocab=10):
    rng = np.random.default_rng(seed)
    return kn.TokenArrays.from_lines(
        [rng.integers(0, vocab, size=rng.integers(1, 12)).tolist() for _ in range(lines)], vocab, 0
    )


def make(kind):
    if kind in ("kneser_ney", "pruned"):
        model = kn.KneserNey(data(0), 4, vocab_size=10)
        if kind == "pruned":
            model.prune([0, 1])
        return model
    return interpolated.InterpolatedTrigram(data(0), data(1), vocab_size=10)


def assert_same(a, b, where="model"):
    """Deep equality over attributes, dataclass fields, containers and arrays; names the first difference."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, (kn.KneserNey, interpolated.InterpolatedTrigram)):
        assert type(a) is type(b), where
        assert sorted(vars(a)) == sorted(vars(b)), f"{where}: attributes {sorted(vars(a))} != {sorted(vars(b))}"
        for name in vars(a):
            assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, dict):
        assert sorted(a) == sorted(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=where)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.parametrize("kind", ["kneser_ney", "pruned", "interpolated"])
def test_a_saved_model_loads_with_every_attribute(kind, tmp_path):
    model = make(kind)
    ngram_lib.save(model, str(tmp_path))
    loaded = ngram_lib.load(str(tmp_path))
    assert_same(model, loaded)
    test = data(2)
    np.testing.assert_array_equal(loaded.token_probabilities(test), model.token_probabilities(test))


@pytest.mark.parametrize("kind", ["kneser_ney", "interpolated"])
def test_a_field_added_to_the_class_but_not_saved_is_caught(kind, tmp_path, monkeypatch):
    """What the check above exists for: a new attribute, computed from the training data, that get_state and
    from_state forget (the constructor given the tables, as from_state calls it, has no data to compute it
    from) fails it."""
    cls = kn.KneserNey if kind == "kneser_ney" else interpolated.InterpolatedTrigram
    original = cls.__init__

    def init_with_a_new_field(self, train, *args, **kwargs):
        original(self, train, *args, **kwargs)
        if train is not None:
            self.smoothing_note = "new"

    monkeypatch.setattr(cls, "__init__", init_with_a_new_field)
    model = make(kind)
    ngram_lib.save(model, str(tmp_path))
    with pytest.raises(AssertionError, match="attributes"):
        assert_same(model, ngram_lib.load(str(tmp_path)))


@pytest.mark.parametrize("kind", ["kneser_ney", "pruned"])
def test_every_order_field_is_in_the_state(kind):
    """Order's fields are saved by iterating over them, so one added to the dataclass travels too; `pruned`,
    which only a pruned model has, is left out of an unpruned one's state and comes back as None."""
    model = make(kind)
    state = model.get_state()
    fields = {f"1_{f.name}" for f in dataclasses.fields(kn.Order)}
    assert fields - set(state) == (set() if kind == "pruned" else {"1_pruned"})
    assert_same(model, kn.KneserNey.from_state(state))


@pytest.mark.parametrize("keep", [0, 100, "no_kind"])
def test_a_damaged_model_file_is_one_sentence(keep, tmp_path):
    """Truncated, empty, or missing an array (a file edited since): once a BadZipFile, EOFError or KeyError
    traceback from numpy."""
    ngram_lib.save(make("kneser_ney"), str(tmp_path))
    path = tmp_path / "ngram.npz"
    if keep == "no_kind":
        with np.load(path) as f:
            state = {k: f[k] for k in f.files if k != "order"}
        np.savez(path, **state)
    else:
        path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(kn.NgramError, match=f"^{path} cannot be read .*restore it, or build it again"):
        ngram_lib.load(str(tmp_path))
