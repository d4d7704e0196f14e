"""Ctrl-C that is never lost: the KeyboardInterrupt is raised at once and, if Python drops it, again later.

Python raises KeyboardInterrupt wherever the main thread is when the signal is
handled. If that is inside a `__del__` method, a weakref callback or a C
library's callback, Python prints "Exception ignored in ..." and drops the
exception, and training goes on as if the key was never pressed.
`install` adds a handler that remembers the interrupt before raising it;
`raise_if_interrupted`, called at every training step's end, raises it again.

    interrupts.install()            # once, in the main thread (pipelines.app does it)
    interrupts.raise_if_interrupted()
"""

from __future__ import annotations

import signal

_seen = False


def _handler(signum, frame) -> None:
    global _seen
    _seen = True
    raise KeyboardInterrupt


def install() -> bool:
    """Replaces Python's default SIGINT handler with the remembering one; returns whether it did.

    A SIGINT that is ignored (a background job of a non-interactive shell,
    `nohup`) or handled by someone else is left as it is.
    """
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, _handler)
    return True


def raise_if_interrupted() -> None:
    """Raises KeyboardInterrupt if a SIGINT arrived since `install` (whether or not its first raise was dropped)."""
    if _seen:
        raise KeyboardInterrupt


def reset() -> None:
    """Forgets an interrupt (for a process that handled one and goes on, such as a test run)."""
    global _seen
    _seen = False
