"""The packages and their arrows, as docs/architecture.md draws them, read from the code.

Every module's imports (top level, inside functions, under TYPE_CHECKING: all of them) are
read with ``ast``. A module may import its own package and the packages its package stands
on: nothing up a floor, whatever kind of import. No two modules may reach each other through
imports, whatever kind (a circle): an import under ``if TYPE_CHECKING:`` counts too. The
recipe's data (``model``, ``engine``, ``parallel``, ``speculative``) imports no rule; the rules
(``rules``, ``parallel_rules``, ``engine_versions``, ``accelerator_rules``) name the ``Recipe``
they check; the engines' argv is in ``inkctl/engines/``, found through
``recipe/engine_registry.py`` by name (no import: the registry is the seam).
The allowed arrows are written once, here, in ``STANDS_ON``: a package named there may be
imported by the one naming it, and so may everything below that.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "inkctl"

# package -> the packages right below it (the floors it stands on); "inkctl" is the base:
# the modules directly in inkctl/ (errors, codes, secret, scrub, bundled).
STANDS_ON: dict[str, tuple[str, ...]] = {
    "inkctl": (),
    "runtimes": ("inkctl",),
    "recipe": ("runtimes",),
    "plan": ("recipe",),
    "engines": ("plan",),  # found by the registry (recipe/engine_registry.py), imported by no module
    "client": ("inkctl",),
    "smoke": ("plan", "client"),
    "execute": ("plan", "smoke"),
    "execute.hosts": ("execute",),
    "execute.state": ("execute.hosts",),
    "execute.image": ("execute.state",),
    "execute.supervise": ("execute.state",),
    "execute.deploy": ("execute.image", "execute.supervise"),
    "weights": ("execute.deploy",),
    "bench": ("execute.state",),
    "export": ("plan",),
    "slurm": ("execute.deploy", "export"),
    "api": ("weights", "bench", "slurm"),
    "cli": ("api", "bench", "export", "slurm"),
}
# the entry point is the one module outside cli/ that may import cli/
ENTRY = {"inkctl.__main__": "cli"}


@functools.cache
def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports_of(name: str, path: Path, known: dict[str, Path], *, types: bool = True) -> set[str]:
    """The inkctl modules ``name`` imports (a package's ``__init__`` counts as that package);
    ``types=False``: leave out the imports under ``if TYPE_CHECKING:``."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    skip = set() if types else _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t.startswith("inkctl") and t != name:
                found.add(t)
    return found


def unit(module: str, known: dict[str, Path]) -> str:
    """The floor a module stands on: its package, or the nearest package above it that
    ``STANDS_ON`` names (``plan/stages/`` is part of ``plan``); the base for inkctl/*.py; a
    top-level package that ``STANDS_ON`` does not name is its own (and fails the test)."""
    if module in ENTRY:
        return ENTRY[module]
    parts = module.split(".")
    package = (parts if known[module].name == "__init__.py" else parts[:-1])[1:]
    if not package:
        return "inkctl"
    for n in range(len(package), 0, -1):
        if ".".join(package[:n]) in STANDS_ON:
            return ".".join(package[:n])
    return package[0]


def below(package: str) -> set[str]:
    seen: set[str] = set()
    todo = list(STANDS_ON[package])
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(STANDS_ON[p])
    return seen


@functools.cache
def graph(types: bool = True) -> dict[str, set[str]]:
    known = modules()
    return {m: imports_of(m, p, known, types=types) for m, p in known.items()}


def test_every_package_has_a_floor():
    known = modules()
    missing = sorted({unit(m, known) for m in known} - set(STANDS_ON))
    assert not missing, f"add these packages to STANDS_ON (and docs/architecture.md): {missing}"


def test_the_floors_themselves_form_no_circle():
    for p in STANDS_ON:
        assert p not in below(p), f"{p} stands on itself"


def test_no_import_up_a_floor():
    known = modules()
    bad = []
    for m, targets in graph().items():
        mine = unit(m, known)
        allowed = below(mine) | {mine}
        bad += [f"{m} -> {t}  ({mine} may import {sorted(allowed)})" for t in sorted(targets)
                if unit(t, known) not in allowed and t != "inkctl"]
    assert not bad, "imports up a floor or sideways:\n" + "\n".join(bad)


def test_no_import_circle():
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not circles, f"modules that import each other: {circles}"


def test_the_checker_sees_what_it_must():
    """The reader finds a lazy import inside a function and a TYPE_CHECKING one."""
    g = graph()
    assert "inkctl.secret" in g["inkctl.scrub"]  # imported inside arm_for()
    assert "inkctl.execute.hosts.target" in g["inkctl.execute.hosts.ssh"]  # under TYPE_CHECKING
    assert "inkctl.recipe.model" in g["inkctl.recipe.checks.rules"]
    assert "inkctl.recipe.model" not in graph(types=False)["inkctl.recipe.checks.rules"]
    known = modules()
    assert unit("inkctl.execute.events", known) == "execute"
    assert unit("inkctl.execute.hosts.ssh", known) == "execute.hosts"
    assert unit("inkctl.plan.stages.launch", known) == "plan"
    assert unit("inkctl.engines.vllm", known) == "engines"
    assert "client" in below("bench") and "cli" not in below("execute.deploy")


def test_every_package_ships():
    """setup.py's find_packages only finds folders with an __init__.py."""
    missing = sorted(str(d.relative_to(ROOT.parent)) for d in ROOT.rglob("*")
                     if d.is_dir() and any(d.glob("*.py")) and not (d / "__init__.py").exists())
    assert not missing, f"add an __init__.py to: {missing}"


def test_api_stands_on_bench_only_for_the_benchmark_commands():
    """The boot records ``up`` keeps are base (``inkctl/bootlog.py``, beside ``runlog.py``):
    only ``bench``, ``results`` and the server they measure (``serving``'s provenance) need the
    load generator's package."""
    g = graph()
    on_bench = sorted(m for m, targets in g.items() if m.startswith("inkctl.api.")
                      and any(t == "inkctl.bench" or t.startswith("inkctl.bench.") for t in targets))
    assert on_bench == ["inkctl.api.measure.bench", "inkctl.api.measure.results", "inkctl.api.measure.serving"]
    assert "inkctl.bootlog" in g["inkctl.api.boots"] and unit("inkctl.bootlog", modules()) == "inkctl"


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (no packages under tests/): two of one name in
    tests/unit, tests/e2e and tests/cluster stop the whole suite at collection."""
    from collections import Counter

    root = Path(__file__).resolve().parents[1]
    names = Counter(p.name for d in ("unit", "e2e", "cluster") for p in (root / d).glob("test_*.py"))
    assert [n for n, k in names.items() if k > 1] == []


MAX_SIDE_BY_SIDE = 20


def crowded(root: Path) -> dict[str, int]:
    """Folders under ``root`` holding more than ``MAX_SIDE_BY_SIDE`` modules (``__init__`` included)."""
    out = {}
    for folder in sorted({p.parent for p in root.rglob("*.py")}):
        n = len(list(folder.glob("*.py")))
        if n > MAX_SIDE_BY_SIDE:
            out[str(folder.relative_to(root.parent))] = n
    return out


def test_no_folder_holds_more_than_twenty_modules_side_by_side():
    """A newcomer reads a folder at a glance: a group that grows past twenty modules becomes a
    subpackage named for what it does (``recipe/checks/``, ``api/observe/``, ``cli/show/``),
    under the same floor (``unit`` gives a subpackage its parent's)."""
    found = crowded(ROOT)
    assert not found, f"more than {MAX_SIDE_BY_SIDE} modules side by side: {found}"


def test_the_count_sees_a_crowded_folder_and_not_its_subpackages(tmp_path):
    pkg = tmp_path / "inkctl" / "big"
    (pkg / "sub").mkdir(parents=True)
    for i in range(MAX_SIDE_BY_SIDE):
        (pkg / f"m{i}.py").write_text("")
        (pkg / "sub" / f"m{i}.py").write_text("")
    assert crowded(tmp_path / "inkctl") == {}
    (pkg / "__init__.py").write_text("")
    assert crowded(tmp_path / "inkctl") == {"inkctl/big": MAX_SIDE_BY_SIDE + 1}
