"""Plain-text tables for a terminal, and the rule every binary follows for its output's form.

A binary that prints results prints a short aligned table when standard output is a terminal (a person reads
it) and machine-readable output (JSON, TSV or Markdown, by the binary) when it is piped or redirected, unless
its --format says which.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def on_terminal() -> bool:
    """Whether standard output is a terminal."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """The rows under the header in aligned columns, two spaces apart; `right[i]`: column i aligned right
    (default: every column but the first, as numbers are)."""
    right = right if right is not None else [i > 0 for i in range(len(header))]
    lines = [list(header), *[list(r) for r in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for line in lines:
        cells = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(line, widths, right)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)
