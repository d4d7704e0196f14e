"""The tree imports one way: no cycle among the folders and top-level modules of nplm_tf, pipelines and tuning,
nor among their modules, counting imports anywhere in a file (inside functions too)."""

import ast
import glob
import os

from tests import helpers

PACKAGES = ("nplm_tf", "pipelines", "tuning")


def unit(path: str) -> str:
    """The part of the tree a file belongs to: a folder of nplm_tf, a top-level module of it, or a package."""
    parts = path.split("/")
    if parts[0] == "nplm_tf" and len(parts) > 2:
        return f"nplm_tf/{parts[1]}"
    if parts[0] == "nplm_tf":
        return f"nplm_tf/{parts[1].removesuffix('.py')}"
    return parts[0]


def import_graph() -> dict[str, dict[str, list[str]]]:
    """unit -> unit it imports -> the file imports that make the edge."""
    graph: dict[str, dict[str, list[str]]] = {}
    for package in PACKAGES:
        for path in sorted(glob.glob(f"{package}/**/*.py", root_dir=helpers.ROOT, recursive=True)):
            project, _ = helpers.imports_of(path)
            for imported in project:
                if imported.split("/")[0] in PACKAGES and unit(imported) != unit(path):
                    graph.setdefault(unit(path), {}).setdefault(unit(imported), []).append(f"{path} -> {imported}")
    return graph


def cycles(graph: dict[str, dict]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    nodes = set(graph) | {w for edges in graph.values() for w in edges}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_folders_import_one_way():
    graph = import_graph()
    assert graph["nplm_tf/training"] and graph["nplm_tf/network"]  # the graph was read at all
    found = cycles(graph)
    why = [edge for c in found for a in c for b in c if b in graph.get(a, {}) for edge in graph[a][b][:2]]
    assert not found, f"import cycles {found}: {why}"


def test_config_imports_no_model_code_and_run_dir_builds_no_model():
    graph = import_graph()
    assert set(graph["nplm_tf/core"]) == {"pipelines"}  # the core reads the pipelines' files and nothing more
    modules = module_graph()
    project = lambda path: {m for m in modules[path] if not m.endswith("__init__.py")}  # noqa: E731
    assert project("nplm_tf/core/config.py") <= {"nplm_tf/core/hardware.py"} | _pipelines(modules)
    assert project("nplm_tf/core/run_dir.py") <= {"nplm_tf/core/config.py"} | _pipelines(modules)


def _pipelines(modules: dict) -> set[str]:
    return {m for edges in modules.values() for m in edges if m.startswith("pipelines/")}


def test_a_cycle_is_found_where_there_is_one():
    planted = {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}}
    assert cycles(planted) == [["a", "b", "c"]]
    assert cycles({"a": {"b": []}, "b": {"c": []}}) == []


def module_graph() -> dict[str, dict[str, list[str]]]:
    """module -> module it imports (a package's `__init__.py` included) -> that edge, anywhere in the file."""
    graph = {}
    for package in PACKAGES:
        for path in glob.glob(f"{package}/**/*.py", root_dir=helpers.ROOT, recursive=True):
            for imported in helpers.imports_of(path, packages=True)[0]:
                if imported.split("/")[0] in PACKAGES:
                    graph.setdefault(path, {})[imported] = [f"{path} -> {imported}"]
    return graph


def test_the_modules_import_one_way():
    """No circle between modules either, imports inside functions counted (objectives once imported the model,
    which imported objectives inside `compile_model`; the heads' factory imported objectives, which import it)."""
    graph = module_graph()
    assert "nplm_tf/network/heads/__init__.py" in graph["nplm_tf/network/objectives.py"]  # packages are nodes
    found = cycles(graph)
    assert not found, f"import cycles between modules: {found}"


# Third-party packages slow or large to load, the only reason an import may sit inside a function.
HEAVY = {
    "tensorflow",
    "tensorflow_text",
    "keras",
    "keras_tuner",
    "tensorboard",
    "h5py",
    "matplotlib",
    "sklearn",
    "scipy",
    "kenlm",
    "flashlight",
    "pyctcdecode",
    "jiwer",
    "torch",
}


def imported_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted modules an import statement loads (`from package import module` names the module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.module is None:
        return []
    project = node.module.split(".")[0] in helpers.PACKAGES
    return [
        f"{node.module}.{a.name}" if project and helpers.module_file(f"{node.module}.{a.name}") else node.module
        for a in node.names
    ]


def import_statements(tree: ast.AST, in_functions: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements run when the module loads (`in_functions` False) or when a function runs (True)."""
    found, work = [], [(tree, False)]
    while work:
        node, inside = work.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)) and inside == in_functions:
            found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue  # read by type checkers only
        for child in ast.iter_child_nodes(node):
            work.append((child, inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))))
    return sorted(found, key=lambda n: n.lineno)


def loaded_files(name: str) -> list[str]:
    """The project files importing a dotted name runs: its packages' `__init__.py` and the module."""
    parts = name.split(".")
    files = [helpers.module_file(".".join(parts[:i])) for i in range(1, len(parts) + 1)]
    return [f for f in files if f]


def heavy_loads(name: str) -> set[str]:
    """The heavy third-party packages importing a dotted name loads, following module-level imports."""
    if name.split(".")[0] not in helpers.PACKAGES:
        return {name.split(".")[0]} & HEAVY
    heavy, seen, work = set(), set(), loaded_files(name)
    while work:
        path = work.pop()
        if path in seen:
            continue
        seen.add(path)
        with open(os.path.join(helpers.ROOT, path), encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in import_statements(tree, in_functions=False):
            for imported in imported_names(node):
                if imported.split(".")[0] in helpers.PACKAGES:
                    work.extend(loaded_files(imported))
                else:
                    heavy |= {imported.split(".")[0]} & HEAVY
    return heavy


def deferred_imports() -> list[tuple[str, int, str, set[str], bool]]:
    """(file, line, the statement, heavy packages it loads, whether a comment says why) for each import inside a
    function. A comment says why when it ends the import's line or stands on the line above the run of imports
    the statement is in."""
    found = []
    for package in PACKAGES:
        for path in sorted(glob.glob(f"{package}/**/*.py", root_dir=helpers.ROOT, recursive=True)):
            with open(os.path.join(helpers.ROOT, path), encoding="utf-8") as f:
                source = f.read()
            lines = source.splitlines()
            for node in import_statements(ast.parse(source, path), in_functions=True):
                heavy = set().union(*(heavy_loads(n) for n in imported_names(node)))
                row = node.lineno - 1
                while row > 0 and (
                    not lines[row - 1].strip() or lines[row - 1].lstrip().startswith(("import ", "from "))
                ):
                    row -= 1  # up to the run's first line
                said = "#" in lines[node.lineno - 1] or (row > 0 and lines[row - 1].lstrip().startswith("#"))
                found.append((path, node.lineno, lines[node.lineno - 1].strip(), heavy, said))
    return found


def test_an_import_inside_a_function_defers_a_heavy_package_and_says_so():
    """An import sits inside a function only to keep a heavy package (TensorFlow, Keras, matplotlib, …) from
    loading with the module, and a comment says so; anything else is imported at the top."""
    found = deferred_imports()
    assert any("tensorflow" in heavy for *_, heavy, _ in found)  # the walk reached TensorFlow through the tree
    # A package's module `__getattr__` (PEP 562) may load a submodule on first use: `import nplm_tf` loads nothing.
    light = [f"{p}:{line}: {text}" for p, line, text, heavy, _ in found if not heavy and not p.endswith("__init__.py")]
    assert not light, "imports inside functions that load nothing heavy (import them at the top):\n" + "\n".join(light)
    silent = [f"{path}:{line}: {text}" for path, line, text, _, said in found if not said]
    assert not silent, "deferred imports no comment explains:\n" + "\n".join(silent)


def test_the_top_level_of_nplm_tf_holds_the_binaries_alone():
    """Library modules live in subpackages (`core/`, `interop/`, ...); each top-level module is a binary."""
    top = glob.glob("nplm_tf/*.py", root_dir=helpers.ROOT)
    library = []
    for path in sorted(top):
        with open(os.path.join(helpers.ROOT, path), encoding="utf-8") as f:
            if path != "nplm_tf/__init__.py" and "app.run(" not in f.read():
                library.append(path)
    assert len(top) > 10 and library == []
