"""What the machine's processors can do that the defaults depend on."""

from __future__ import annotations

# Linux /proc/cpuinfo flags of the x86 instructions that compute bfloat16 matmuls natively.
BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The first processor's feature flags, or None where they cannot be read (not Linux, not x86)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        return None
    return None


TRAIN_ADVICE = "a new run with --precision=float32 is usually faster on it"


def bfloat16_notice(precision: str, cpuinfo: str = "/proc/cpuinfo", advice: str = TRAIN_ADVICE) -> str | None:
    """One sentence when `precision` asks for bfloat16 matmuls that this CPU would emulate, else None; it ends
    with `advice`.

    Without AVX512-BF16 or AMX (most AMD processors before Zen 4, Intel before Cooper Lake), oneDNN converts
    bfloat16 to float32 around each matmul, and mixed_bfloat16 trains slower than float32 (benchmarks/README.md).
    Training on a GPU, or where the flags cannot be read, says nothing.
    """
    if precision != "mixed_bfloat16":
        return None
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return None
    flags = cpu_flags(cpuinfo)
    if flags is None or flags.intersection(BFLOAT16_CPU_FLAGS):
        return None
    return (
        "note: this CPU has no bfloat16 instructions (avx512_bf16 or amx_bf16), so --precision=mixed_bfloat16 is "
        f"emulated here; {advice}."
    )
