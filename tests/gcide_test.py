"""The GCIDE reader on small files in dictd's real format, written here."""

import gzip
import os
import time

import pytest

from pipelines import corpus, gcide
from tests import helpers

HEADER = (
    "00-database-url\n   ftp://ftp.gnu.org/gnu/gcide\n\n"
    "00-database-short\n   The Collaborative International Dictionary of English v.0.48\n\n"
    "===============================================================\n\n"
    " Begin file 1 of 26:  Letter A (Version 0.48) \n   This file is part 1 of the GNU version\n\n"
)
DOG = (
    "Dog \\Dog\\ (d[add]g or d[o^]g), n. [AS. docga; akin to D. dog\n"
    "   mastiff, Dan. dogge, Sw. dogg.]\n"
    "   1. (Zool.) A quadruped of the genus {Canis}, esp. the\n"
    "      domestic dog ({Canis familiaris}).\n"
    "      [1913 Webster +PJC]\n\n"
    "   2. A mean, worthless fellow; a wretch.\n"
    "      [1913 Webster]\n\n"
    "            What is thy servant, which is but a dog, that he\n"
    "            should do this great thing?           -- 2 Kings\n"
    "                                                  viii. 13 (Rev.\n"
    "                                                  Ver. )\n"
    "      [1913 Webster]\n"
)
JURY = (
    "Jury \\Ju\"ry\\, n.; pl. {Juries}. [OF. jur['e]e an assize, fr.\n"
    "   jurer to swear.]\n"
    "   1. (Law) A body of people sworn to try any matter of fact;\n"
    "      -- used of twelve persons. [Obs.] --Shak.\n"
    "      [1913 Webster]\n"
)


def write_dict(path, entries, compress=True):
    text = HEADER + "\n\n".join(entries) + "\n"
    data = text.encode("utf-8")
    if compress:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return str(path)


def numbered(i):
    return f"Word{i} \\Word{i}\\, n.\n   The entry number {i}.\n   [PJC]\n"


def test_an_entry_keeps_definitions_and_quotations_and_drops_the_rest():
    assert gcide.entry_text(DOG) == (
        "A quadruped of the genus Canis , esp . the domestic dog ( Canis familiaris ) . "
        "A mean , worthless fellow ; a wretch . "
        "What is thy servant , which is but a dog , that he should do this great thing ?"
    )
    assert gcide.entry_text(JURY) == "A body of people sworn to try any matter of fact ; - - used of twelve persons ."


def test_the_file_is_split_by_entry_position(tmp_path):
    path = write_dict(tmp_path / "gcide.dict.dz", [DOG, JURY] + [numbered(i) for i in range(2, 40)])
    lines = gcide.convert(path)
    assert [len(lines[s]) for s in corpus.SPLITS] == [36, 2, 2]
    assert lines["valid"] == ["The entry number 18 .", "The entry number 38 ."]
    assert lines["test"] == ["The entry number 19 .", "The entry number 39 ."]
    assert lines["train"][0].startswith("A quadruped") and lines["train"][1].startswith("A body of people")


def test_the_corpus_is_cached_as_text_files_and_streams(tmp_path):
    path = write_dict(tmp_path / "gcide.dict.dz", [numbered(i) for i in range(40)])
    first = gcide.gcide_corpus(path, str(tmp_path / "cache"))
    assert first.name == "gcide"
    assert first.spec == {"corpus": "gcide", "gcide_path": str(path), "gcide_cache": str(tmp_path / "cache")}
    assert list(first["valid"].iter_lines()) == ["The entry number 18 .\n", "The entry number 38 .\n"]
    again = gcide.gcide_corpus(path, str(tmp_path / "cache"))
    assert again["train"].files == first["train"].files
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me\n")
    with pytest.raises(corpus.CorpusError, match=f"^--gcide_cache={a_file} cannot hold the converted text"):
        gcide.gcide_corpus(path, str(a_file))  # once a NotADirectoryError, after the conversion
    assert a_file.read_text() == "keep me\n"


def test_a_killed_conversions_temporaries_are_removed_once_an_hour_old(tmp_path):
    path = write_dict(tmp_path / "gcide.dict.dz", [numbered(i) for i in range(40)])
    directory = os.path.dirname(gcide.gcide_corpus(path, str(tmp_path / "cache"))["test"].files[0])
    os.remove(os.path.join(directory, "test.txt"))  # killed while writing test.txt ...
    abandoned = os.path.join(directory, ".tmp-4242-test.txt")
    live = os.path.join(directory, ".tmp-4343-test.txt")  # ... and another process is writing it now
    for name in (abandoned, live):
        with open(name, "w") as f:
            f.write("The entry")
    two_hours_ago = time.time() - 7200
    os.utime(abandoned, (two_hours_ago, two_hours_ago))
    again = gcide.gcide_corpus(path, str(tmp_path / "cache"))
    assert list(again["test"].iter_lines()) == ["The entry number 19 .\n", "The entry number 39 .\n"]
    assert sorted(os.listdir(directory)) == [".tmp-4343-test.txt", "test.txt", "train.txt", "valid.txt"]


def test_plain_dict_and_windows_1252_bytes_are_read(tmp_path):
    path = tmp_path / "gcide.dict"
    write_dict(path, [numbered(i) for i in range(3)], compress=False)
    path.write_bytes(path.read_bytes().replace(b"entry number 1.", b"entry\x92s number 1."))
    assert gcide.convert(str(path))["train"][1] == "The entry\u2019s number 1 ."


@pytest.mark.parametrize("case", ["missing", "directory", "not_gzip_dictd", "not_dictd"])
def test_bad_gcide_path_is_one_sentence(case, tmp_path):
    if case == "missing":
        path, message = tmp_path / "none.dict.dz", "apt-get download dict-gcide"
    elif case == "directory":  # dpkg -x's DIR: once "GCIDE not found at DIR; get it with apt-get download ..."
        path = tmp_path / "d"
        (path / "usr" / "share" / "dictd").mkdir(parents=True)
        write_dict(path / "usr" / "share" / "dictd" / "gcide.dict.dz", [DOG])
        message = f"--gcide_path={path} is a directory; give the dictionary file in it: --gcide_path={path}/usr/share"
    elif case == "not_gzip_dictd":
        path, message = tmp_path / "broken.dict.dz", "is not a readable dictd file"
        path.write_bytes(b"\x1f\x8b\x08junk")
    else:
        path, message = tmp_path / "text.dict.dz", "is not a dictd dictionary file"
        with gzip.open(path, "wb") as f:
            f.write(b"just some text\n\nmore text\n")
    result = helpers.run_binary(
        "pipelines.describe", "--corpus=gcide", f"--gcide_path={path}", f"--gcide_cache={tmp_path / 'c'}"
    )
    assert "Traceback" not in result.stderr
    helpers.assert_one_sentence(result, message)
    assert not (tmp_path / "c").exists()  # the cache directory made for the conversion is removed


def test_describe_prints_the_sizes(tmp_path):
    path = write_dict(tmp_path / "gcide.dict.dz", [DOG, JURY] + [numbered(i) for i in range(2, 40)])
    result = helpers.run_binary(
        "pipelines.describe",
        "--corpus=gcide",
        f"--gcide_path={path}",
        f"--gcide_cache={tmp_path / 'c'}",
        "--min_count=1",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"corpus": "gcide"' in result.stdout and '"valid": 12' in result.stdout
