"""Keeps BUILD true to the tree (Bazel cannot build offline here).

BUILD is Starlark, a subset of Python: it is executed with stub rules that
record every target, then checked against the files on disk and against
each module's own imports: a target's local deps are exactly the targets of
the project modules its sources import, and its `requirement(...)` deps
exactly the packages of the third-party modules they import.
"""

import ast
import glob
import os

import pytest

from tests import helpers

# Top-level import name -> the requirement it comes from (setup.py's names).
REQUIREMENTS = {
    "absl": "absl-py",
    "flashlight": "flashlight-text",
    "google": "protobuf",
    "h5py": "h5py",
    "jiwer": "jiwer",
    "keras": "keras",
    "keras_tuner": "keras-tuner",
    "kenlm": "kenlm",
    "matplotlib": "matplotlib",
    "numpy": "numpy",
    "pytest": "pytest",
    "pyctcdecode": "pyctcdecode",
    "pygtrie": "pygtrie",
    "scipy": "scipy",
    "sklearn": "scikit-learn",
    "tensorflow": "tensorflow",
    "tensorboard": "tensorboard",
    "tensorflow_text": "tensorflow-text",
}


def build_targets(text=None):
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
    if text is None:
        with open(os.path.join(helpers.ROOT, "BUILD"), encoding="utf-8") as f:
            text = f.read()
    exec(compile(text, "BUILD", "exec"), env)
    return targets


def listed_sources(kinds):
    return {src for t in build_targets() if t["kind"] in kinds for src in t.get("srcs", [])}


def tree_files(pattern):
    return {os.path.relpath(p, helpers.ROOT) for p in glob.glob(os.path.join(helpers.ROOT, pattern), recursive=True)}


def dependency_errors(targets) -> list[str]:
    """Each target whose deps differ from its sources' imports, with what is missing and what is extra."""
    owner = {src: t["name"] for t in targets if t["kind"] != "py_test" for src in t.get("srcs", [])}
    errors = []
    for target in targets:
        project, external = set(), set()
        for src in target.get("srcs", []):
            files, names = helpers.imports_of(src)
            project |= files
            external |= names
        unknown = sorted(n for n in external if n not in REQUIREMENTS)
        if unknown:
            errors.append(f"{target['name']}: no requirement known for imports {unknown}")
        expected = {f":{owner[p]}" for p in project if p in owner} | {
            f"@pypi//{REQUIREMENTS[n]}" for n in external if n in REQUIREMENTS
        }
        unowned = sorted(p for p in project if p not in owner)
        if unowned:
            errors.append(f"{target['name']}: imports {unowned}, which no library or binary lists")
        deps = set(target.get("deps", []))
        if deps != expected:
            errors.append(
                f"{target['name']}: missing {sorted(expected - deps)}, not imported {sorted(deps - expected)}"
            )
    return errors


def test_every_module_has_a_library_or_binary():
    modules = set().union(*(tree_files(f"{pkg}/**/*.py") for pkg in helpers.PACKAGES if pkg != "tests"))
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


def test_deps_are_exactly_the_imports():
    assert dependency_errors(build_targets()) == []


def test_a_dependency_dropped_or_added_is_caught():
    with open(os.path.join(helpers.ROOT, "BUILD"), encoding="utf-8") as f:
        text = f.read()
    dropped = text.replace('deps = [":files", ', "deps = [", 1)
    assert dropped != text
    assert any("missing [':files']" in e for e in dependency_errors(build_targets(dropped)))
    added = text.replace('srcs = ["pipelines/errors.py"],', 'srcs = ["pipelines/errors.py"],\n    deps = [":corpus"],')
    assert added != text
    assert any("not imported [':corpus']" in e for e in dependency_errors(build_targets(added)))


@pytest.mark.parametrize("kind", ["py_binary"])
def test_binaries_point_at_their_main(kind):
    for target in build_targets():
        if target["kind"] == kind:
            assert target["main"] in target["srcs"]


def script_errors(scripts: dict[str, str]) -> list[str]:
    """Each installed binary (a py_binary outside benchmarks/, which setup.py does not install) without its
    `nplm-NAME = module:run` script, and each script naming a module or function that does not exist."""
    errors = []
    for target in build_targets():
        main = target.get("main", "")
        if target["kind"] != "py_binary" or main.startswith("benchmarks/"):
            continue
        module = main[: -len(".py")].replace("/", ".")
        name = f"nplm-{target['name']}"
        if scripts.get(name) != f"{module}:run":
            errors.append(f"{main}: no console script {name}={module}:run (setup.py has {scripts.get(name)!r})")
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        path = helpers.module_file(module)
        if path is None or function not in _functions(path):
            errors.append(f"{name}: {target} does not exist")
    return errors


def _functions(path: str) -> set[str]:
    """The names of the functions a module defines at its top level."""
    with open(os.path.join(helpers.ROOT, path), encoding="utf-8") as f:
        return {node.name for node in ast.parse(f.read(), path).body if isinstance(node, ast.FunctionDef)}


def test_every_binary_is_installed_as_a_command():
    scripts = helpers.console_scripts()
    assert "nplm-train" in scripts
    assert script_errors(scripts) == []
    # Caught: a binary left out, and a script naming a function that is not there.
    assert any("nplm-compare" in e for e in script_errors({k: v for k, v in scripts.items() if k != "nplm-compare"}))
    assert any("does not exist" in e for e in script_errors(dict(scripts, **{"nplm-x": "nplm_tf.train:nothing"})))
