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
