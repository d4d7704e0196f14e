import json
import re

import pytest

from nplm_tf.core.config import Config, ConfigError
from nplm_tf.network import heads


def test_defaults_are_the_papers_mlp9_shape():
    c = Config()
    assert (c.order, c.hidden_dim, c.feature_dim, c.direct, c.min_count) == (5, 100, 30, False, 4)


@pytest.mark.parametrize(
    "field,value",
    [
        ("order", 1),
        ("feature_dim", 0),
        ("hidden_dim", -3),
        ("epochs", 0),
        ("batch_size", 0),
        ("optimizer", "rmsprop"),
        ("learning_rate", 0.0),
        ("lr_decay", -1.0),
        ("weight_decay", -1e-3),
        ("precision", "float16"),
        ("min_count", 0),
        ("max_vocab", -1),
        ("max_vocab", 2),  # </s> and <unk> only
        ("seed", -1),  # numpy's seeding took it, with a traceback, after the run directory was made
        ("seed", 2**32),
    ],
)
def test_bad_values_name_the_field(field, value):
    with pytest.raises(ConfigError, match=f"^{field}="):
        Config(**{field: value})


def test_the_tail_pruning_thresholds_are_read_as_ngram_reads_them():
    assert Config(shortlist=100).tail_prune == (0, 0, 0, 0)  # K = min(4, n)
    assert Config(shortlist=100, tail_ngram_prune="0,0,1").tail_prune == (0, 0, 1, 1)
    assert Config(shortlist=100, tail_ngram_order=3, tail_ngram_prune="0,1,2").tail_prune == (0, 1, 2)
    for value in ("1", "0,2,1", "0,a", "0,0,0,0,1"):
        with pytest.raises(ConfigError, match=f"^tail_ngram_prune={value}"):
            Config(shortlist=100, tail_ngram_prune=value)
    with pytest.raises(ConfigError, match="^tail_ngram_prune='0,1' needs a short list with an n-gram tail"):
        heads.kind(Config(shortlist=100, tail="network", tail_ngram_prune="0,1"))  # the head says which take one


@pytest.mark.parametrize(
    "field,value,kind",
    [
        ("hidden_dim", "100", "an integer"),
        ("order", 5.0, "an integer"),
        ("epochs", True, "an integer"),
        ("learning_rate", "0.1", "a finite number"),
        ("learning_rate", float("inf"), "a finite number"),  # inf and nan: once trained to NaN weights
        ("lr_decay", float("inf"), "a finite number"),
        ("weight_decay", float("inf"), "a finite number"),
        ("dropout", float("nan"), "a finite number"),
        ("direct", 1, "true or false"),
        ("tail", None, "a string"),
        ("tail_ngram_prune", [0, 0, 1], "a string"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(field, value, kind):
    """As a --config_json may give it: once a TypeError traceback, or a bool taken for a number."""
    with pytest.raises(ConfigError, match=f"^{re.escape(f'{field}={value!r} must be {kind}.')}$"):
        Config(**{field: value})
    assert Config(learning_rate=1, dropout=0).learning_rate == 1  # a JSON integer is a number


def test_json_round_trip_and_unknown_fields(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(Config(hidden_dim=7).to_dict()))
    assert Config.from_json(str(path)) == Config(hidden_dim=7)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as Notepad saves it: once "not valid JSON"
    assert Config.from_json(str(path)) == Config(hidden_dim=7)
    with pytest.raises(ConfigError, match="unknown config field"):
        Config.from_dict({"hiden_dim": 3})
    with pytest.raises(ConfigError, match=f"^config file {re.escape(str(tmp_path))} is a directory; give the JSON"):
        Config.from_json(str(tmp_path))  # once an IsADirectoryError traceback


def test_differences_ignore_fields_a_resume_may_change():
    assert Config(epochs=3).differences(Config(epochs=9)) == []
    assert Config(hidden_dim=3).differences(Config()) == ["hidden_dim"]


def test_no_hidden_units_needs_direct_connections():
    assert Config(hidden_dim=0, direct=True).hidden_dim == 0
    with pytest.raises(ConfigError, match="^hidden_dim=0"):
        Config(hidden_dim=0)


def test_balancing_workers_needs_local_sgd():
    assert Config(sync_every=4, balance_workers=True).balance_workers
    with pytest.raises(ConfigError, match=r"^balance_workers=True needs sync_every > 1"):
        Config(balance_workers=True)


def test_every_config_field_is_a_train_flag_with_its_default_and_values():
    """The configuration is described once: `train` defines a flag per `Config` field whose default is the field's
    (read from `Config()`, not retyped; `train`'s own defaults for a new run read from its TRAIN_DEFAULTS) and whose
    choices are the values `Config` accepts."""
    import dataclasses
    import subprocess
    import sys

    from nplm_tf.core import config as config_lib
    from tests import helpers

    probe = (
        "import json; from absl import flags; import nplm_tf.train; "
        "print(json.dumps({n: [f.default, sorted(getattr(f.parser, 'enum_values', None) or [])] "
        "for n, f in flags.FLAGS._flags().items()})); "
        "print(json.dumps(nplm_tf.train.TRAIN_DEFAULTS))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=helpers.ROOT, capture_output=True, text=True, check=True)
    defined, own = (json.loads(line) for line in out.stdout.splitlines()[-2:])
    choices = {
        "optimizer": config_lib.OPTIMIZERS,
        "tail": config_lib.TAILS,
        "loss": config_lib.LOSSES,
        "precision": config_lib.PRECISIONS + ("auto",),
    }
    for field in dataclasses.fields(Config):
        assert field.name in defined, f"Config.{field.name} has no --{field.name}"
        default, values = defined[field.name]
        # `train` without flags trains a larger shape until the gain stops, within a bound
        # (tests/convergence_test.py): its own defaults, which configs written without them do not take
        assert default == own.get(field.name, field.default), field.name
        if field.name in choices:
            assert values == sorted(choices[field.name]), field.name
