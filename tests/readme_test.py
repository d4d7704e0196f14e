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


BINARY_PACKAGES = tuple(p for p in helpers.PACKAGES if p != "tests")
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok", "only_check_args"}


@functools.cache
def file_flags(path: str) -> frozenset[str]:
    """The flag names the project file `path` defines: the string given first to each `DEFINE_*` or
    `define_path` call."""
    names = set()
    for node in ast.walk(ast.parse(open(os.path.join(helpers.ROOT, path), encoding="utf-8").read())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func.startswith("DEFINE_") or func == "define_path":
                names.add(node.args[0].value)
    return frozenset(names)


@functools.cache
def project_imports(path: str) -> tuple[str, ...]:
    return tuple(helpers.imports_of(path)[0])


def defined_flags(module: str) -> set[str]:
    """The flag names a binary can take, read from the source without importing it: those its file and every
    project module it imports, transitively (`helpers.imports_of`), define (a flag defined inside a helper
    counts for every importer: lenient, never a false alarm)."""
    names, seen, todo = set(ABSL_FLAGS), set(), [helpers.module_file(module)]
    while todo:
        path = todo.pop()
        if path is None or path in seen:
            continue
        seen.add(path)
        names |= file_flags(path)
        todo += project_imports(path)
    return names


def documented_uses(text: str) -> list[tuple[str, str]]:
    """(module, flag) for each `--flag` written after `python -m <project module>` or an `nplm-*` command in
    `text`, up to the end of that command (a pipe, `;`, `&`, a backtick or the line's end; `\\` continues)."""
    scripts = {name: target.partition(":")[0] for name, target in helpers.console_scripts().items()}
    text = re.sub(r"\\\n\s*", " ", text)
    uses = []
    for m in re.finditer(
        r"(?:python3? -m |(?<![\w-]))((?:%s)\.[\w.]+|nplm-[\w-]+)([^|;&`\n]*)" % "|".join(BINARY_PACKAGES), text
    ):
        module = scripts.get(m.group(1), m.group(1))
        uses += [(module, flag) for flag in re.findall(r"--(\w+)", m.group(2))]
    return uses


def test_every_flag_the_docs_give_a_binary_is_one_it_defines():
    pages = ["README.md", "benchmarks/README.md", *sorted(glob.glob("docs/*.md", root_dir=helpers.ROOT))]
    unknown, checked, cache = [], 0, {}
    for page in pages:
        for module, flag in documented_uses(open(os.path.join(helpers.ROOT, page), encoding="utf-8").read()):
            if helpers.module_file(module) is None:
                unknown.append(f"{page}: no module {module}")
                continue
            if module not in cache:
                cache[module] = defined_flags(module)
            defined = cache[module]
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


def test_the_documents_keep_to_the_sizes_a_newcomer_reads():
    """README ≤ 250 lines with one results table of at most 10 rows; benchmarks/README.md ≤ 300 lines of current
    figures (no dated diary, no HISTORY.md beyond 100 lines); each file of docs/ ≤ 250 lines."""

    def lines(path):
        return open(os.path.join(helpers.ROOT, path), encoding="utf-8").read().splitlines()

    readme = lines("README.md")
    assert len(readme) <= 250
    start = readme.index("## Results")
    table = [line for line in readme[start : readme.index("## Using it")] if line.startswith("|")]
    assert 3 <= len(table) - 2 <= 10  # header and rule, then the rows
    assert len(lines("benchmarks/README.md")) <= 300
    assert not any(re.search(r"\(20\d\d-\d\d-\d\d", line) for line in lines("benchmarks/README.md"))
    history = os.path.join(helpers.ROOT, "benchmarks", "HISTORY.md")
    assert not os.path.exists(history) or len(lines("benchmarks/HISTORY.md")) <= 100
    for page in sorted(glob.glob("docs/*.md", root_dir=helpers.ROOT)):
        assert len(lines(page)) <= 250, page


def results_rows(text: str | None = None) -> list[tuple[str, str, str]]:
    """(model, test perplexity, command) of each row of the README's results table, markup left out."""
    text = text if text is not None else readme()
    section = text[text.index("## Results") : text.index("## Using it")]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3].startswith("`python -m "):
            rows.append((cells[0], cells[1].replace("*", ""), cells[3].strip("`")))
    return rows


def test_the_readmes_ngram_figures_are_what_their_commands_print(tmp_path):
    """The results table's rows whose commands take seconds (the n-gram baselines on Brown) are run as written,
    into a scratch directory: each prints the test perplexity the README gives, to its two decimals. The
    networks' rows take minutes to hours; their figures keep the two decimals hosts agree on (one seed's
    default network: 164.512 on AMX, 164.525 on Zen 4, benchmarks/README.md)."""
    import json
    import shlex

    rows = results_rows()
    assert len(rows) >= 8 and any("--ngram_dir" in command for _, _, command in rows)
    checked = 0
    for model, figure, command in rows:
        words = shlex.split(command)
        if words[:3] != ["python", "-m", "nplm_tf.ngram"]:
            continue
        args = [re.sub(r"^--output=.*", f"--output={tmp_path / str(checked)}", w) for w in words[3:]]
        result = helpers.run_binary("nplm_tf.ngram", *args, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"{json.loads(result.stdout.splitlines()[-1])['test_perplexity']:.2f}" == figure, model
        checked += 1
    assert checked == 2  # KN5 and the interpolated trigram
