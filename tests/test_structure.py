"""The import structure is the architecture: layers that import only those below them, no loop anywhere, and
an import inside a function only for an optional heavy dependency (torch, transformers, ray, streamlit...), a
module that stands on Mesa or torch, or in a CLI command (it imports what it runs when it runs).

Read from the code itself (the AST of every module), so a change that crosses a layer the wrong way, closes a
loop, or hides one behind an import in a function fails here, naming the modules. docs/architecture.md draws
the same layers.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim", "agents", "scenarios", "runner", "analysis", "societas", "societas_verifiers", "app_pages")

#: the layers, lowest first: a module may import its own package's modules and those of lower layers only. Each
#: top-level folder is one band of consecutive layers (test_each_folder_is_one_band_of_layers), so the tree shows
#: them: sim/ (the engine a scenario stands on) -> agents/ (decision backends) -> scenarios/ -> runner/ ->
#: analysis/ -> societas/ (the faces) -> the app
LAYERS: list[tuple[str, ...]] = [
    ("sim.core",),
    # the contracts the tick calls through (agent base, memory, strategy type, backend protocol), beside the
    # reward layer and the store
    ("sim.contracts", "sim.reward", "sim.store"),
    ("sim.tick",),
    # the engine's public faces for scenario files and scripts: `from sim.model import SocietyModel`...
    ("sim.model", "sim.spaces", "sim.errors"),
    ("agents",),
    ("scenarios",),
    ("runner",),
    ("analysis",),
    # the faces: the PettingZoo env, the Python API, the conformance kit; then the command line, which uses them
    ("societas", "societas.env", "societas.api", "societas.testing"),
    # the RL libraries' adapters, over the PettingZoo env
    ("societas.adapters",),
    ("societas.cli",),
    # the verifiers plugin: societas.adapters.verifiers under the top-level name verifiers imports it by
    ("societas_verifiers",),
    # ADDRESSES: where users import three faces that live in societas/ (`import sim` resolves societas.api's names
    # on first use, `sim.env` and `sim.testing` re-export societas.env and societas.testing); they face up, and no
    # module of the project imports them
    ("sim", "sim.env", "sim.testing"),
    ("app_pages",),
    ("app",),
]
#: the public addresses inside sim/ of faces that live above it: the one exception to a folder's single band
ADDRESSES = ("sim", "sim.env", "sim.testing")
#: third-party modules that may be imported inside a function: optional or heavy, needed only on some paths
#: (alembic: only when a store's schema is created or migrated)
HEAVY = ("torch", "transformers", "ray", "streamlit", "langchain_core", "langchain_openai", "tqdm", "pyarrow",
         "networkx.algorithms", "lifelines", "vl_convert", "alembic",
         "trl", "datasets")  # the optional RL libraries of societas.adapters
#: the third-party libraries that make a project module heavy when it imports them at module level
HEAVY_BASES = ("torch", "mesa")
#: the faces whose functions may import any layer below: a command imports what it runs when it runs, so that
#: `societas --help` and `--version` load no store, runner, Mesa or model (design 15; tests/test_cli_imports.py)
RUN_TIME_IMPORTERS = ("societas.cli",)


def modules() -> dict[str, Path]:
    """Every module of the project: dotted name -> file (alembic's revision scripts excluded: alembic runs them)."""
    found = {"app": ROOT / "app.py"}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "migrations" in path.parts and path.name != "env.py":
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = modules()


def _owner(name: str) -> str:
    """The layer entry a module belongs to (its longest matching package)."""
    best = ""
    for layer in LAYERS:
        for pkg in layer:
            if (name == pkg or name.startswith(pkg + ".")) and len(pkg) > len(best):
                best = pkg
    return best


LEVEL = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def imports(name: str) -> Iterator[tuple[str, bool, list[str], int]]:
    """(imported module, at module level?, names taken, line) for every import of a project module in `name`
    (imports under `if TYPE_CHECKING:` are for type checkers only and left out)."""
    tree = ast.parse(MODULES[name].read_text())
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]

    def walk(node: ast.AST, top: bool) -> Iterator[tuple[str, bool, list[str], int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, top, [], child.lineno
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    yield (full if full in MODULES else base), top, [alias.name], child.lineno
            else:
                inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from walk(child, inner)

    yield from walk(tree, True)


def project(target: str) -> bool:
    return target in MODULES or target.split(".")[0] in (*PACKAGES, "app")


def graph(top_only: bool = True) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, top, _, _ in imports(m):
            if project(target) and (top or not top_only) and target in MODULES and target != m:
                out[m].add(target)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in g:
        if v not in index:
            visit(v)
    return found


def torch_modules() -> set[str]:
    """Project modules that import torch at module level (the local model's): heavy, imported where needed."""
    return {m for m in MODULES if any(t == "torch" and top for t, top, _, _ in imports(m))}


def test_every_module_belongs_to_a_layer():
    assert [m for m in MODULES if not _owner(m)] == []


def test_no_import_loop_anywhere():
    """Counting imports inside functions too: a loop hidden in a function is still a loop."""
    assert cycles(graph(top_only=False)) == []


def test_each_folder_is_one_band_of_layers():
    """The tree shows the layers: each top-level folder holds consecutive layers that no other folder's layer
    interleaves (the public ADDRESSES aside), so an arrow between folders runs one way."""
    bands: dict[str, set[int]] = {}
    for m in MODULES:
        owner = _owner(m)
        if owner not in ADDRESSES:
            bands.setdefault(m.split(".")[0], set()).add(LEVEL[owner])
    spans = sorted((min(levels), max(levels), top) for top, levels in bands.items())
    overlapping = [f"{a[2]} (layers {a[0]}-{a[1]}) and {b[2]} (layers {b[0]}-{b[1]})"
                   for a, b in zip(spans, spans[1:]) if b[0] <= a[1]]
    assert overlapping == []
    gaps = {top: sorted(set(range(min(levels), max(levels) + 1)) - levels) for top, levels in bands.items()}
    assert {top: gap for top, gap in gaps.items() if gap} == {}


def test_the_tick_stands_on_the_contracts_not_on_a_backend():
    """The tick and the scenarios' base reach agents, memory, strategies and backends through sim.contracts:
    no sim module imports agents/ (the decision backends stand above the engine)."""
    found = [f"{m}:{line} imports {t}" for m in MODULES if m.split(".")[0] == "sim" and _owner(m) not in ADDRESSES
             for t, _, _, line in imports(m) if t.split(".")[0] == "agents"]
    assert found == []


def test_no_layer_imports_a_higher_one():
    wrong = []
    for m in MODULES:
        mine = _owner(m)
        for target, _, _, line in imports(m):
            if not (project(target) and target in MODULES):
                continue
            theirs = _owner(target)
            same_package = theirs == mine
            if not same_package and LEVEL[theirs] >= LEVEL[mine]:
                wrong.append(f"{m}:{line} imports {target} ({theirs} is not below {mine})")
    assert wrong == []


def heavy_modules() -> set[str]:
    """Project modules that import a heavy library (`HEAVY_BASES`) at module level: imported where needed."""
    return {m for m in MODULES if any(t.split(".")[0] in HEAVY_BASES and top for t, top, _, _ in imports(m))}


def test_imports_inside_functions_are_only_for_heavy_dependencies():
    heavy_project = heavy_modules()
    found = []
    for m in MODULES:
        at_run_time = any(m == face or m.startswith(face + ".") for face in RUN_TIME_IMPORTERS)
        for target, top, _, line in imports(m):
            if top:
                continue
            if project(target):
                if target not in heavy_project and not at_run_time:
                    found.append(f"{m}:{line} imports {target} inside a function (not a torch or Mesa module)")
            elif not target.startswith(HEAVY) and target.split(".")[0] not in sys.stdlib_module_names:
                if not at_run_time:
                    found.append(f"{m}:{line} imports {target} inside a function (not a heavy optional dependency)")
            elif target.split(".")[0] in sys.stdlib_module_names:
                found.append(f"{m}:{line} imports the standard library's {target} inside a function")
    assert found == []


def test_only_the_local_model_imports_torch_and_only_the_app_imports_streamlit():
    assert {m.rsplit(".", 1)[0] for m in torch_modules()} == {"agents.llm.local"}
    streamlit = {m for m in MODULES if any(t.split(".")[0] == "streamlit" for t, *_ in imports(m))}
    assert all(m == "app" or m.startswith("app_pages") for m in streamlit), streamlit


def test_no_private_name_crosses_a_module():
    found = [f"{m}:{line} takes {name} from {target}"
             for m in MODULES for target, _, names, line in imports(m) if project(target)
             for name in names if name.startswith("_") and not name.startswith("__")]
    assert found == []


def test_no_scenario_asks_which_decision_contract_it_runs_under():
    """An old behaviour is a frozen piece a scenario picks once from its editions (sim.tick.editions), never a switch
    in its rules: no scenario module reads the decision profile or the run's contract."""
    found = []
    for m in (m for m in MODULES if m.startswith("scenarios.")):
        for node in ast.walk(ast.parse(MODULES[m].read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("profile", "contract"):
                found.append(f"{m}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.Name) and node.id in ("profile", "PROFILES", "CONTRACT"):
                found.append(f"{m}:{node.lineno} uses {node.id}")
    assert found == []


def test_the_public_faces_are_imported_by_no_library_module():
    """sim.model, sim.spaces, sim.errors, sim.contracts, sim.env and sim.testing re-export for scenario files and
    scripts; the library uses the layers (the example scenarios in scenarios/examples are written as a user's file is)."""
    faces = {"sim.model", "sim.spaces", "sim.errors", "sim.contracts", "sim.env", "sim.testing", "societas.api", "sim"}
    users = ("app", "societas.cli", "societas.testing", "scenarios.examples")
    found = [f"{m} imports {t}" for m in MODULES if m not in faces and not m.startswith(users)
             for t, *_ in imports(m) if t in faces]
    assert found == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_every_module_imports_on_its_own_in_a_fresh_process():
    """Each module imported alone in a new process (its third-party dependencies preloaded, so it is fast): an
    import that works only after another module was imported first fails here."""
    import subprocess

    names = [m for m in MODULES if not m.startswith("app") and "migrations" not in m]
    script = (
        "import os, sys, importlib\n"
        "for pkg in ('numpy', 'pandas', 'mesa', 'sqlalchemy', 'sqlmodel', 'alembic', 'pydantic', 'networkx', 'typer',\n"
        "            'rich', 'yaml', 'pyarrow', 'torch', 'langchain_core', 'scipy.stats', 'sqlite3', 'pettingzoo',\n"
        "            'gymnasium'):\n"
        "    importlib.import_module(pkg)\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        try:\n"
        "            importlib.import_module(name)\n"
        "        except BaseException as exc:\n"
        "            print(name, type(exc).__name__, exc, file=sys.stderr)\n"
        "            os._exit(1)\n"
        "        os._exit(0)\n"
        "    if os.waitpid(pid, 0)[1]:\n"
        "        failed.append(name)\n"
        "print('FAILED', failed)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "FAILED []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
