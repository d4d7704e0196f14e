import pytest

from nplm_tf import hardware

AVX2_ONLY = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
WITH_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n"


def write(tmp_path, text):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return str(path)


def test_cpu_flags_reads_the_first_processors_flags(tmp_path):
    assert hardware.cpu_flags(write(tmp_path, AVX2_ONLY)) == {"fpu", "sse2", "avx", "avx2", "fma"}
    assert hardware.cpu_flags(str(tmp_path / "absent")) is None
    assert hardware.cpu_flags(write(tmp_path, "processor\t: 0\n")) is None


@pytest.mark.parametrize(
    "cpuinfo,precision,speaks",
    [
        (AVX2_ONLY, "mixed_bfloat16", True),
        (WITH_BF16, "mixed_bfloat16", False),
        (AVX2_ONLY, "float32", False),
        (None, "mixed_bfloat16", False),  # flags unreadable: nothing is claimed
    ],
)
def test_bfloat16_notice_only_where_bfloat16_would_be_emulated(tmp_path, cpuinfo, precision, speaks):
    path = write(tmp_path, cpuinfo) if cpuinfo else str(tmp_path / "absent")
    notice = hardware.bfloat16_notice(precision, cpuinfo=path)
    assert (notice is not None) == speaks
    if speaks:
        assert "--precision=float32" in notice


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
