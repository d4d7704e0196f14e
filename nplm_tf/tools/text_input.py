"""Standard input as lines of text: UTF-8 checked line by line, so an error names its line."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from pipelines.corpus import CorpusError, drop_byte_order_mark


def read_lines(stream=None) -> Iterator[str]:
    """The lines of `stream` (default: standard input, as bytes), without their line ends."""
    stream = stream if stream is not None else sys.stdin.buffer
    for number, raw in enumerate(stream, start=1):
        try:
            yield drop_byte_order_mark(raw.decode("utf-8"), number).rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise CorpusError(f"standard input line {number} is not valid UTF-8 (byte {e.start}).") from None
