"""No function in inkctl has a cyclomatic complexity over 25 (issue 27: the tree explains itself).

Counted as radon counts a block: each function and method on its own, a closure apart from the
function that holds it (the thin commands of ``test_thin.py`` are held tighter: 10, closures
included). A function that grows past this has two jobs: split it by what each does.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_thin import complexity

ROOT = Path(__file__).resolve().parents[2] / "inkctl"
MAX = 25
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def own(fn: ast.AST) -> ast.AST:
    """``fn`` without the functions and classes defined in it (they are blocks of their own)."""
    copy = ast.parse(ast.unparse(fn)).body[0]
    for node in ast.walk(copy):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if node is not copy and isinstance(node, DEFS):
                continue
            if isinstance(block, list) and block:
                kept = [s for s in block if not isinstance(s, (*DEFS, ast.ClassDef))]
                setattr(node, name, kept or ([ast.Pass()] if name in ("body", "finalbody") else []))
    return copy


def blocks(path: Path) -> list[tuple[str, int, int]]:
    """(qualified name, line, complexity) of every function, method and closure in a module."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, DEFS):
                name = f"{prefix}{child.name}"
                out.append((name, child.lineno, complexity(own(child))))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), str(path)), "")
    return out


def test_no_function_is_over_complexity_25():
    heavy = [f"{p.relative_to(ROOT.parent)}:{line} {name}: {c}"
             for p in sorted(ROOT.rglob("*.py")) for name, line, c in blocks(p) if c > MAX]
    assert not heavy, "over complexity 25 (split it by what each part does):\n" + "\n".join(heavy)


def test_a_closure_is_a_block_of_its_own(tmp_path):
    src = '''
def outer(a):
    if a:
        pass
    def inner(b):
        if b and a:
            pass
    class K:
        def m(self):
            for _ in a:
                pass
    return inner
'''
    path = tmp_path / "sample.py"
    path.write_text(src)
    assert blocks(path) == [("outer", 2, 2), ("outer.inner", 5, 3), ("outer.K.m", 9, 2)]
