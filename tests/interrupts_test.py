"""Ctrl-C is never lost: a KeyboardInterrupt that Python drops is raised again at the next check."""

import signal
import sys

import pytest

from pipelines import interrupts
from tests import helpers


def test_an_interrupt_dropped_inside_a_del_is_raised_again(monkeypatch):
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: dropped.append(info.exc_type))
    with helpers.remembering_interrupts():
        interrupts.raise_if_interrupted()  # nothing yet
        helpers.DropsAnInterrupt()  # deleted at once
        assert dropped == [KeyboardInterrupt]  # Python dropped the first raise ...
        with pytest.raises(KeyboardInterrupt):  # ... and the check raises it again
            interrupts.raise_if_interrupted()


def test_an_ignored_or_foreign_sigint_handler_is_left_alone():
    previous = signal.getsignal(signal.SIGINT)
    try:
        for handler in (signal.SIG_IGN, lambda *_: None):
            signal.signal(signal.SIGINT, handler)
            assert not interrupts.install()
            assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)
