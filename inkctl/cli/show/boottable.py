"""The boot table at the end of ``up`` and in ``inkctl results --boots``: where the time went."""

from __future__ import annotations

from inkctl.execute.supervise.bootphases import INKCTL_PHASES, LABELS, ORDER, slowest

MAX_RANK_COLUMNS = 4  # more ranks: the fastest and the slowest rank per phase


def _cell(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def boot_table(record: dict, slower: tuple[str, ...] | list[str] = ()) -> str:
    ranks = record.get("ranks") or []
    marks = record.get("inkctl") or {}
    many = len(ranks) > MAX_RANK_COLUMNS
    heads = ["fastest", "slowest"] if many else [f"r{r['rank']} {r['host']}"[:11] for r in ranks]
    lines = [f"{'boot phase (s)':<22}{'at':>7}  " + "".join(f"{h:>12}" for h in heads)]
    lines += _proof_line(record.get("proof"))
    for key in ORDER:
        if key in INKCTL_PHASES:
            if key in marks:
                lines.append(f"{LABELS[key]:<22}{marks[key]:>7.1f}")
            continue
        row = _phase_row(key, ranks, many)
        if row is not None:
            lines.append(row)
    lines += [f"slower than before: {text}" for text in slower]
    return "\n".join(lines)


def _proof_line(proof: dict | None) -> list[str]:
    """The argv proof: before the launch, in preflight, so not on the boot's clock."""
    if not proof:
        return []
    said = "engine asked" if proof.get("asked") else "kept verdict, 0 asked"
    return [f"{'argv proof (before)':<22}{proof.get('seconds', 0.0):>7.1f}  {said}"]


def _phase_row(key: str, ranks: list[dict], many: bool) -> str | None:
    """One engine phase: each rank's seconds (or the fastest and the slowest rank); None when no rank said it."""
    vals = [(r.get("seconds") or {}).get(key) for r in ranks]
    if all(v is None for v in vals):
        return None
    if many:
        got = [(v, r["rank"]) for v, r in zip(vals, ranks) if v is not None]
        lo, hi = min(got), max(got)
        cells = [f"{lo[0]:.1f} r{lo[1]}", f"{hi[0]:.1f} r{hi[1]}"]
    else:
        cells = [_cell(v) for v in vals]
    label = LABELS[key]
    if key == "compile":
        states = [r.get("compile_cache") for r in ranks]
        if len(set(states)) == 1 and states[0]:
            label = f"torch.compile ({states[0]})"
        elif not many:  # ranks differ: each cell says whether it came from the cache
            cells = [f"{c} {st}" if st else c for c, st in zip(cells, states)]
    return f"{label:<22}{'':>7}  " + "".join(f"{c:>12}" for c in cells)


def boot_compare(a_id: str, a: dict, b_id: str, b: dict) -> str:
    """Two boots side by side, slowest rank per phase; delta of B against A."""
    sa, sb = slowest(a), slowest(b)
    lines = [f"A: {a_id}", f"B: {b_id}", f"{'phase (s)':<22}{'A':>9}{'B':>9}{'delta':>9}"]
    for key in ORDER:
        if key not in sa and key not in sb:
            continue
        va, vb = sa.get(key), sb.get(key)
        delta = f"{vb - va:+.1f}" if va is not None and vb is not None else "-"
        lines.append(f"{LABELS[key]:<22}{_cell(va):>9}{_cell(vb):>9}{delta:>9}")
    return "\n".join(lines)
