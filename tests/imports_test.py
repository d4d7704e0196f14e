"""The tree imports one way: no cycle among the folders and top-level modules of nplm_tf, pipelines and tuning,
nor among their modules, counting imports anywhere in a file (inside functions too)."""

import glob

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
    assert set(graph.get("nplm_tf/config", {})) <= {"nplm_tf/hardware", "pipelines"}
    assert set(graph.get("nplm_tf/run_dir", {})) <= {"nplm_tf/config", "pipelines"}


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
