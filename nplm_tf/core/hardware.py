"""What the machine's processors can do that the defaults depend on."""

from __future__ import annotations

import functools
import os


def _first_processor(cpuinfo: str) -> dict[str, str] | None:
    """The first processor's fields of /proc/cpuinfo (`flags`, `vendor_id`, ...), or None where the file cannot be
    read (not Linux)."""
    fields = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, colon, value = line.partition(":")
                if not line.strip() and fields:
                    break  # the second processor begins after a blank line
                if colon:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        return None
    return fields


def _flags(fields: dict[str, str] | None) -> set[str] | None:
    return set(fields["flags"].split()) if fields and "flags" in fields else None


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The first processor's feature flags, or None where they cannot be read (not Linux, not x86)."""
    return _flags(_first_processor(cpuinfo))


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The first processor's `vendor_id` ("GenuineIntel", "AuthenticAMD", ...), or None where it cannot be read."""
    fields = _first_processor(cpuinfo)
    return fields.get("vendor_id") if fields else None


def has_gpu(driver: str = "/proc/driver/nvidia/gpus") -> bool:
    """Whether the NVIDIA driver lists a GPU (read without TensorFlow, which takes seconds to load)."""
    try:
        return bool(os.listdir(driver))
    except OSError:
        return False


@functools.lru_cache(maxsize=None)  # the machine does not change within a process; every Config("auto") asks
def fast_precision(cpuinfo: str = "/proc/cpuinfo", gpu: bool | None = None) -> tuple[str, str]:
    """The faster of float32 and mixed_bfloat16 on this machine (what `--precision=auto` picks), and why.

    mixed_bfloat16 where bfloat16 matmuls run natively and faster than float32: a GPU, a CPU with AMX, an AMD
    CPU with AVX512-BF16 (Zen 4). float32 everywhere else: without AVX512-BF16 or AMX, oneDNN emulates
    bfloat16 (converting around each matmul); with AVX512-BF16 but no AMX on an Intel CPU it trains slower
    than float32; another maker's AVX512-BF16 is not measured; unreadable flags say nothing
    (benchmarks/README.md, "Training throughput and precision"). `gpu`: whether a GPU is present (default: `has_gpu`).
    """
    if has_gpu() if gpu is None else gpu:
        return "mixed_bfloat16", "a GPU"
    fields = _first_processor(cpuinfo)
    flags = _flags(fields)
    if flags is None:
        return "float32", "the CPU's features cannot be read"
    if "amx_bf16" in flags:
        return "mixed_bfloat16", "this CPU has AMX"
    if "avx512_bf16" in flags:
        if fields.get("vendor_id") == "AuthenticAMD":
            return "mixed_bfloat16", "this AMD CPU has AVX512-BF16"
        return "float32", "this CPU has AVX512-BF16 but no AMX, where bfloat16 trains slower"
    return "float32", "this CPU has no bfloat16 instructions (bfloat16 would be emulated)"


TRAIN_ADVICE = "a new run with --precision=float32 is usually faster on it"


def bfloat16_notice(
    precision: str, cpuinfo: str = "/proc/cpuinfo", advice: str = TRAIN_ADVICE, training: bool = True
) -> str | None:
    """One sentence when `precision` asks for bfloat16 matmuls that run slower than float32 on this CPU, else
    None; it ends with `advice`.

    Without AVX512-BF16 or AMX (most AMD processors before Zen 4, Intel before Cooper Lake), oneDNN converts
    bfloat16 to float32 around each matmul, and mixed_bfloat16 trains and serves slower than float32. With
    AVX512-BF16 but no AMX it depends on the maker: an Intel Xeon trained faster in float32 and served alike,
    so `training` (the default) speaks there, serving does not; an AMD EPYC of the Zen 4 generation trained
    faster in mixed_bfloat16, so nothing is said there, nor for other makers, not measured
    (benchmarks/README.md, "Training throughput and precision"). On a GPU, or where the flags cannot be read,
    nothing.
    """
    if precision != "mixed_bfloat16":
        return None
    # deferred: TensorFlow loads when this runs, not with the module
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return None
    fields = _first_processor(cpuinfo)  # read once for the flags and the maker
    flags = _flags(fields)
    if flags is None or "amx_bf16" in flags:
        return None
    if "avx512_bf16" not in flags:
        return (
            "note: this CPU has no bfloat16 instructions (avx512_bf16 or amx_bf16), so --precision=mixed_bfloat16 "
            f"is emulated here; {advice}."
        )
    if not training or fields.get("vendor_id") != "GenuineIntel":
        return None
    return (
        "note: this Intel CPU has AVX512-BF16 but no AMX (amx_bf16), where --precision=mixed_bfloat16 trains slower "
        f"than float32; {advice}."
    )
