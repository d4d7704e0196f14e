"""The test tiers of tests/conftest.py: a test is slow when it, a fixture or a helper of its module runs a binary."""

import sys

from tests import conftest, helpers


class Item:
    """What `conftest.is_slow` reads of a collected test."""

    def __init__(self, function):
        self.function, self.module = function, sys.modules[__name__]
        self.fixturenames, self._fixtureinfo = (), None


def launch():
    return helpers.run_binary("nplm_tf.runs", "--help")


def indirectly():
    return launch()


def unit_only():
    return sum(range(3))


def test_a_test_that_reaches_a_binary_through_its_modules_helpers_is_slow():
    assert conftest.is_slow(Item(lambda: indirectly()))
    assert conftest.is_slow(Item(launch))


def test_a_unit_test_is_fast():
    assert not conftest.is_slow(Item(unit_only))
