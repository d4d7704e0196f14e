"""How much of the host's CPU time the hypervisor took while a measurement ran (Linux `/proc/stat`'s steal
time), so that a speed measured on an oversubscribed virtual machine says so beside its figure.

    before = host.cpu_times()
    ...  # the measurement
    share = host.steal_share(before, host.cpu_times())  # 0.0-1.0 of all CPUs' time, or None

A share of a few percent is the usual background; tens of percent mean the figure measured the neighbours
as much as the code, and ratios between variants timed at different moments are not to be trusted.
"""

from __future__ import annotations

STAT = "/proc/stat"
_FIELDS = 8  # user nice system idle iowait irq softirq steal (guest time is counted in user and nice)


def cpu_times(path: str = STAT) -> tuple[int, ...] | None:
    """All CPUs' cumulative times from `path`'s first line, or None where there is no such file (not Linux)."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 1 + _FIELDS or fields[0] != "cpu":
        return None
    return tuple(int(x) for x in fields[1 : 1 + _FIELDS])


def steal_share(before: tuple[int, ...] | None, after: tuple[int, ...] | None) -> float | None:
    """The share of CPU time stolen between two `cpu_times` readings (None if either is missing or no time
    passed)."""
    if before is None or after is None:
        return None
    total = sum(after) - sum(before)
    return (after[7] - before[7]) / total if total > 0 else None
