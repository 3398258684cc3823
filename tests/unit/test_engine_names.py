"""Nothing outside the engine modules compares against an engine's name: every engine-specific
decision is a slot of the engine's spec (inkctl/engines/<kind>.py, docs/engines.md).

Read with ``ast``: a comparison (``==``, ``!=``, ``in``, ``not in``, ``match``) with a string
literal that is a registered kind, or a dict keyed by one, in any module outside
``inkctl/engines/``. The allow-list says why each entry is not an engine's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from inkctl.recipe.engine_registry import kinds

ROOT = Path(__file__).resolve().parents[2] / "inkctl"
ENGINES = ROOT / "engines"

ALLOWED = {  # module -> why its literal is not a comparison with an engine kind
    "plan/replicas/fleet.py": "router.kind: the request router's name (sglang-router), not the engine's",
    "recipe/fleet.py": "the routers' policies and images, keyed by router kind (sglang-router, vllm-router)",
    # how an imported command names its engine and spells its flags is the engines' (`programs`,
    # `underscore_flags`, `served_aliases`); sparkrun's own runtime names are sparkrun's words
    "recipe/foreign/sparkrun.py": "sparkrun's runtime names (vllm, sglang, vllm-ray...): another tool's vocabulary",
    "cli/bench.py": "--format vllm: the saved-result format of `vllm bench serve`",
}


def _literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for e in node.elts for v in _literals(e)]
    return []


def named(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of each comparison with, or dict key of, an engine's name."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found = [v for side in (node.left, *node.comparators) for v in _literals(side) if v in names]
        elif isinstance(node, ast.Dict):
            found = [v for k in node.keys if k is not None for v in _literals(k) if v in names]
        elif isinstance(node, ast.MatchValue):
            found = [v for v in _literals(node.value) if v in names]
        else:
            continue
        out += [(node.lineno, v) for v in found]
    return out


def test_no_module_outside_the_engines_compares_an_engines_name():
    names = set(kinds())
    bad = []
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if p.is_relative_to(ENGINES) or rel in ALLOWED:
            continue
        bad += [f"inkctl/{rel}:{line}: {v!r}" for line, v in named(ast.parse(p.read_text(), str(p)), names)]
    assert not bad, "ask the engine's spec (recipe/engine_registry.py) instead:\n" + "\n".join(bad)


def test_the_check_finds_what_it_must():
    names = {"vllm", "sglang"}
    tree = ast.parse('if e.kind == "vllm": pass\nx = k in ("sglang", "z")\nd = {"vllm": 1}\n'
                     'match k:\n    case "sglang": pass\nok = k == "docker"')
    assert named(tree, names) == [(1, "vllm"), (2, "sglang"), (3, "vllm"), (5, "sglang")] or \
        sorted(named(tree, names)) == [(1, "vllm"), (2, "sglang"), (3, "vllm"), (5, "sglang")]


def test_the_allow_list_is_current():
    """Each allowed module still has what it is allowed (else the entry goes)."""
    names = set(kinds())
    for rel in ALLOWED:
        assert named(ast.parse((ROOT / rel).read_text()), names), f"{rel} no longer needs its allow-list entry"
