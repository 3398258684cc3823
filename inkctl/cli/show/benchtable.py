"""Plain-text tables of bench points, runs and comparisons (80 columns)."""

from __future__ import annotations

from pathlib import Path


def point_header(goodput: bool = False) -> str:
    head = (f"{'conc':>6} {'rate':>6} {'done':>5} {'fail':>4} {'req/s':>6} {'out tok/s':>10}"
            f" {'TTFT med/p99 ms':>17} {'TPOT med/p99 ms':>17}")
    if goodput:  # a second line per point: 80 columns hold no more
        head += f"\n{'':>6} {'ITL med/p99 ms':>17} {'goodput req/s':>14}"
    return head


def _ms(p: dict, name: str, digits: int) -> str:
    """A latency; ``-`` where no request completed (an all-failed point measured nothing)."""
    v = p.get(name)
    return "-" if v is None or not p.get("completed") else f"{v:.{digits}f}"


def point_line(p: dict, goodput: bool = False) -> str:
    conc = p.get("max_concurrency")
    rate = p.get("request_rate")
    line = (f"{conc if conc is not None else '-':>6} {rate if isinstance(rate, str) else f'{rate:g}':>6}"
            f" {p['completed']:>5} {p['failed']:>4} {p['request_throughput']:>6.2f} {p['output_throughput']:>10.1f}"
            f" {_ms(p, 'median_ttft_ms', 1):>8}/{_ms(p, 'p99_ttft_ms', 1):<8}"
            f" {_ms(p, 'median_tpot_ms', 2):>8}/{_ms(p, 'p99_tpot_ms', 2):<8}").rstrip()
    if goodput:
        good = p.get("request_goodput")
        itl = f"{_ms(p, 'median_itl_ms', 2):>8}/{_ms(p, 'p99_itl_ms', 2):<8}"
        line += f"\n{'':>6} {itl} {('-' if good is None else f'{good:.2f}'):>14}"
    return line


def progress_text(conc: int | None, rate: float | None, done: int, failed: int, total: int | None) -> str:
    """``  c=64: 23/64 done, 0 failed`` for a terminal's line while a point runs."""
    where = f"c={conc}" if rate is None else f"rate={rate:g}" + (f" c<={conc}" if conc else "")
    of = f"/{total}" if total else ""
    return f"  {where}: {done}{of} done, {failed} failed"


def runs_table(runs: list[dict], base: Path) -> str:
    if not runs:
        return f"no runs under {base} (inkctl bench saves them there)"
    lines = [f"{'run':<40} {'points':>6}  model"]
    for r in runs:
        lines.append(f"{r['id'][:40]:<40} {len(r['points']):>6}  {str(r['model'])[:32]}")
    return "\n".join(lines)


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 1e5 else f"{v:.3g}"
    return "-" if v is None else str(v)


def compare_table(rows: list[dict], a: str, b: str) -> str:
    lines = [f"A = {a}", f"B = {b}", f"{'point':<8} {'metric':<24} {'A':>12} {'B':>12} {'delta':>9}"]
    for r in rows:
        d = r["delta_pct"]
        mark = "" if r["better"] is None else (" +" if r["better"] else " -")
        delta = f"{d:+.1f}%" if d is not None else "-"
        lines.append(f"{r['point']:<8} {r['metric']:<24} {_num(r['a']):>12} {_num(r['b']):>12} {delta:>9}{mark}")
    lines.append("delta = (B - A) / A; + better, - worse")
    return "\n".join(lines)


def recipe_table(rows: list[dict], run: str) -> str:
    """80 columns: how a value was found goes on the row's line where it fits, else on the next."""
    lines = [f"run {run} against the recipe's results:",
             f"{'metric':<22} {'conc':>4} {'recipe':>10} {'run':>10} {'delta':>8}  how"]
    for r in rows:
        d = r["delta_pct"]
        row = (f"{r['metric'][:22]:<22} {r['concurrency'] or '-':>4} {_num(r['recipe']):>10} {_num(r['run']):>10}"
               f" {(f'{d:+.1f}%' if d is not None else '-'):>8}")
        how = r["how"] or ""
        if len(row) + 2 + len(how) <= 80:
            lines.append(f"{row}  {how}".rstrip())
        else:
            import textwrap

            lines.append(row)
            lines += textwrap.wrap(how, 80, initial_indent="    how: ", subsequent_indent="    ")
    return "\n".join(lines)
