import pytest

from nplm_tf.core import hardware

AVX2_ONLY = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
WITH_AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
AVX512_BF16_ONLY = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
# AMD's Zen 4: AVX512-BF16 without AMX too, but there mixed_bfloat16 trained 1.2-1.5x faster than float32.
ZEN4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
UNKNOWN_MAKER = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"


def write(tmp_path, text):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return str(path)


def test_cpu_flags_reads_the_first_processors_flags(tmp_path):
    assert hardware.cpu_flags(write(tmp_path, AVX2_ONLY)) == {"fpu", "sse2", "avx", "avx2", "fma"}
    assert hardware.cpu_flags(str(tmp_path / "absent")) is None
    assert hardware.cpu_flags(write(tmp_path, "processor\t: 0\n")) is None


def test_cpu_vendor_reads_the_first_processors_maker(tmp_path):
    assert hardware.cpu_vendor(write(tmp_path, AVX2_ONLY)) == "AuthenticAMD"
    assert hardware.cpu_vendor(write(tmp_path, AVX512_BF16_ONLY)) == "GenuineIntel"
    second_only = "processor\t: 0\nflags\t\t: fpu\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n"
    assert hardware.cpu_vendor(write(tmp_path, second_only)) is None
    assert hardware.cpu_vendor(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(
    "cpuinfo,precision,training,says",
    [
        (AVX2_ONLY, "mixed_bfloat16", True, "emulated"),
        (AVX2_ONLY, "mixed_bfloat16", False, "emulated"),  # serving: emulated is slower too
        (AVX512_BF16_ONLY, "mixed_bfloat16", True, "no AMX"),  # trained 1.4-1.6x faster in float32
        (ZEN4, "mixed_bfloat16", True, None),  # trained 1.2-1.5x slower in float32
        (UNKNOWN_MAKER, "mixed_bfloat16", True, None),  # not measured: nothing is claimed
        (AVX512_BF16_ONLY, "mixed_bfloat16", False, None),  # served within noise of float32
        (WITH_AMX, "mixed_bfloat16", True, None),
        (AVX2_ONLY, "float32", True, None),
        (None, "mixed_bfloat16", True, None),  # flags unreadable: nothing is claimed
    ],
)
def test_bfloat16_notice_only_where_bfloat16_is_slower(tmp_path, cpuinfo, precision, training, says):
    path = write(tmp_path, cpuinfo) if cpuinfo else str(tmp_path / "absent")
    notice = hardware.bfloat16_notice(precision, cpuinfo=path, training=training)
    assert (notice is not None) == (says is not None), notice
    if says:
        assert says in notice and "--precision=float32" in notice


@pytest.mark.parametrize("users_setting,expected", [(None, "true"), ("false", "false")])
def test_importing_the_package_turns_on_the_bfc_cpu_allocator_unless_the_user_chose(users_setting, expected):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    if users_setting is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = users_setting
    printed = subprocess.run(
        [sys.executable, "-c", "import os, nplm_tf; print(os.environ['TF_CPU_ALLOCATOR_USE_BFC'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert printed == expected


@pytest.mark.parametrize(
    "cpuinfo,gpu,chosen,why",
    [
        (AVX2_ONLY, False, "float32", "no bfloat16 instructions"),
        (AVX512_BF16_ONLY, False, "float32", "AVX512-BF16 but no AMX"),
        (UNKNOWN_MAKER, False, "float32", "AVX512-BF16 but no AMX"),  # not measured: the safe one
        (ZEN4, False, "mixed_bfloat16", "AMD CPU has AVX512-BF16"),
        (WITH_AMX, False, "mixed_bfloat16", "AMX"),
        (None, False, "float32", "cannot be read"),
        (AVX2_ONLY, True, "mixed_bfloat16", "a GPU"),
    ],
)
def test_auto_precision_is_the_faster_one_for_the_machine(tmp_path, cpuinfo, gpu, chosen, why):
    path = write(tmp_path, cpuinfo) if cpuinfo else str(tmp_path / "absent")
    precision, reason = hardware.fast_precision(path, gpu=gpu)
    assert precision == chosen and why in reason


def test_a_config_asking_auto_records_the_precision_chosen(monkeypatch):
    from nplm_tf.core.config import Config

    for chosen in ("float32", "mixed_bfloat16"):
        monkeypatch.setattr(hardware, "fast_precision", lambda *a, chosen=chosen, **k: (chosen, "patched"))
        assert Config().precision == chosen and Config(precision="auto").to_dict()["precision"] == chosen
    assert Config(precision="mixed_bfloat16").precision == "mixed_bfloat16"  # an explicit one wins
    assert not hardware.has_gpu("/nonexistent/driver")
