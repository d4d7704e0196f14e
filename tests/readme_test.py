"""The README and the docs against the code: the README's two commands (one sets up and trains on Brown, one
sets up and runs the tests, which `.ci/run` runs as written), and every flag the docs give a binary."""

import ast
import functools
import glob
import os
import re

from tests import helpers


def commands(readme: str) -> list[str]:
    """The README's indented command lines that start by making the virtual environment, in order."""
    return [line.strip() for line in readme.splitlines() if line.startswith("    python3 -m venv .venv")]


def readme() -> str:
    return open(os.path.join(helpers.ROOT, "README.md"), encoding="utf-8").read()


def test_the_readme_gives_the_main_job_and_the_test_command():
    main, test = commands(readme())  # exactly two
    assert "-m nplm_tf.train " in main and "NLTK_DATA=../shared/nltk_data" in main
    assert " -m pytest " in test and test.endswith(" tests") and "'.[test]'" in test


def test_ci_runs_the_readmes_test_command_as_written():
    _, test = commands(readme())
    ci = open(os.path.join(helpers.ROOT, ".ci", "run"), encoding="utf-8").read()
    assert test in ci.splitlines()
    assert os.access(os.path.join(helpers.ROOT, ".ci", "run"), os.X_OK)


def test_the_readmes_later_test_line_is_the_same_pytest_call():
    """The "Tests, formatting and benchmarks" section repeats the pytest call for a made environment."""
    text = readme()
    _, test = commands(text)
    pytest_call = test[test.index("NLTK_DATA=") :]
    section = text[text.index("## Tests, formatting and benchmarks") :]
    assert pytest_call in [line.strip() for line in section.splitlines()]


PACKAGES = ("nplm_tf", "pipelines", "tuning", "benchmarks")
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok", "only_check_args"}


def module_path(module: str) -> str | None:
    base = os.path.join(helpers.ROOT, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


@functools.cache
def file_flags_and_imports(path: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The flag names a file defines (the string given first to each `DEFINE_*` or `define_path` call) and the
    project modules it imports (for `from M import N`, both M and M.N, since N may be a module)."""
    names, imports = set(), []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            imports += [a.name for a in node.names if a.name.startswith(PACKAGES)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGES):
            imports += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func.startswith("DEFINE_") or func == "define_path":
                names.add(node.args[0].value)
    return frozenset(names), tuple(imports)


def defined_flags(module: str) -> set[str]:
    """The flag names a binary can take, read from the source without importing it: those its file and every
    project module it imports, transitively, define (a flag defined inside a helper counts for every importer:
    lenient, never a false alarm)."""
    names, seen, todo = set(ABSL_FLAGS), set(), [module]
    while todo:
        name = todo.pop()
        path = module_path(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        defined, imports = file_flags_and_imports(path)
        names |= defined
        todo += imports
    return names


def documented_uses(text: str) -> list[tuple[str, str]]:
    """(module, flag) for each `--flag` written after `python -m <project module>` or an `nplm-*` command in
    `text`, up to the end of that command (a pipe, `;`, `&`, a backtick or the line's end; `\\` continues)."""
    scripts = dict(re.findall(r'"(nplm-[\w-]+)=([\w.]+):run"', open(os.path.join(helpers.ROOT, "setup.py")).read()))
    text = re.sub(r"\\\n\s*", " ", text)
    uses = []
    for m in re.finditer(
        r"(?:python3? -m |(?<![\w-]))((?:%s)\.[\w.]+|nplm-[\w-]+)([^|;&`\n]*)" % "|".join(PACKAGES), text
    ):
        module = scripts.get(m.group(1), m.group(1))
        uses += [(module, flag) for flag in re.findall(r"--(\w+)", m.group(2))]
    return uses


def test_every_flag_the_docs_give_a_binary_is_one_it_defines():
    pages = ["README.md", "benchmarks/README.md", *sorted(glob.glob("docs/*.md", root_dir=helpers.ROOT))]
    unknown, checked, cache = [], 0, {}
    for page in pages:
        for module, flag in documented_uses(open(os.path.join(helpers.ROOT, page), encoding="utf-8").read()):
            if module_path(module) is None:
                unknown.append(f"{page}: no module {module}")
                continue
            defined = cache.setdefault(module, defined_flags(module))
            checked += 1
            if flag not in defined and not (flag.startswith("no") and flag[2:] in defined):
                unknown.append(f"{page}: {module} --{flag}")
    assert checked > 150  # the check reads the pages' commands at all
    assert not unknown, unknown


def test_a_flag_the_binary_does_not_define_is_caught():
    uses = documented_uses(
        "run `python -m nplm_tf.train --model_dir=runs/x --shortlst=4000` then `nplm-evaluate --splt=test`"
    )
    assert uses == [("nplm_tf.train", "model_dir"), ("nplm_tf.train", "shortlst"), ("nplm_tf.evaluate", "splt")]
    assert "shortlist" in defined_flags("nplm_tf.train") and "shortlst" not in defined_flags("nplm_tf.train")
    assert "split" in defined_flags("nplm_tf.evaluate") and "splt" not in defined_flags("nplm_tf.evaluate")
