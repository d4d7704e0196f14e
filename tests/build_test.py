"""Keeps BUILD true to the tree (Bazel cannot build offline here).

BUILD is Starlark, a subset of Python: it is executed with stub rules that
record every target, then checked against the files on disk.
"""

import glob
import os

import pytest

from tests import helpers

PACKAGES = ("pipelines", "nplm_tf", "tuning", "benchmarks")


def build_targets():
    targets = []

    def rule(kind):
        def record(**kwargs):
            targets.append(dict(kwargs, kind=kind))

        return record

    env = {
        "load": lambda *args: None,
        "package": lambda **kwargs: None,
        "requirement": lambda name: f"@pypi//{name}",
        "py_library": rule("py_library"),
        "py_binary": rule("py_binary"),
        "py_test": rule("py_test"),
    }
    with open(os.path.join(helpers.ROOT, "BUILD"), encoding="utf-8") as f:
        exec(compile(f.read(), "BUILD", "exec"), env)
    return targets


def listed_sources(kinds):
    return {src for t in build_targets() if t["kind"] in kinds for src in t.get("srcs", [])}


def tree_files(pattern):
    return {os.path.relpath(p, helpers.ROOT) for p in glob.glob(os.path.join(helpers.ROOT, pattern))}


def test_every_module_has_a_library_or_binary():
    modules = set().union(*(tree_files(f"{pkg}/*.py") for pkg in PACKAGES))
    assert modules, "no modules found"
    assert modules - listed_sources({"py_library", "py_binary"}) == set()


def test_every_test_file_has_a_py_test():
    tests = tree_files("tests/*_test.py")
    tested = {src for t in build_targets() if t["kind"] == "py_test" for src in t["srcs"]}
    assert tests - tested == set()
    for target in build_targets():
        if target["kind"] == "py_test":
            assert len(target["srcs"]) == 1 and target["srcs"][0].endswith("_test.py"), target["name"]


def test_every_listed_file_exists_and_targets_are_unique():
    names = [t["name"] for t in build_targets()]
    assert len(names) == len(set(names))
    for src in listed_sources({"py_library", "py_binary", "py_test"}):
        assert os.path.isfile(os.path.join(helpers.ROOT, src)), src


def test_every_local_dependency_names_a_target():
    names = {t["name"] for t in build_targets()}
    for target in build_targets():
        for dep in target.get("deps", []):
            if dep.startswith(":"):
                assert dep[1:] in names, f"{target['name']} depends on unknown {dep}"


@pytest.mark.parametrize("kind", ["py_binary"])
def test_binaries_point_at_their_main(kind):
    for target in build_targets():
        if target["kind"] == kind:
            assert target["main"] in target["srcs"]
