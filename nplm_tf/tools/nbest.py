"""Moses n-best lists: `id ||| hypothesis ||| feature scores ||| total [||| more fields]`, one per line."""

from __future__ import annotations

import dataclasses

SEPARATOR = " ||| "


@dataclasses.dataclass(frozen=True)
class Entry:
    fields: list[str]  # the line split at " ||| ": id, hypothesis, features, total, ...

    @property
    def hypothesis(self) -> str:
        return self.fields[1]

    def with_feature(self, name: str, value: float) -> str:
        """The line with `name= value` appended to its feature scores."""
        fields = list(self.fields)
        fields[2] = f"{fields[2].rstrip()} {name}= {value:.8g}".lstrip()
        return SEPARATOR.join(fields)


def parse(line: str) -> Entry | None:
    """The entry of one n-best line, or None when it is not in Moses's format."""
    fields = line.split(SEPARATOR)
    if len(fields) < 4 or not fields[0].strip().isdigit():
        return None
    return Entry(fields)
