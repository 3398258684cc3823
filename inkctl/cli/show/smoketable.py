"""The smoke results as a plain-text table that fits 80 columns."""

from __future__ import annotations

import textwrap

WIDTH = 80


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: max(0, n - 3)] + "..."


def smoke_table(results) -> str:
    lines = [f"{'':4} {'check':9} {'TTFT':>7} {'tok/s':>6}  prompt -> answer"]
    for r in results:
        ttft = f"{r.ttft_s * 1000:.0f}ms" if r.ttft_s is not None else "-"
        tps = f"{r.tokens_per_s:.1f}" if r.tokens_per_s else "-"
        head = f"{'ok' if r.ok else 'FAIL':4} {r.kind:9} {ttft:>7} {tps:>6}  "
        room = WIDTH - len(head)
        answer = r.answer or "(nothing)"
        prompt = _cut(r.prompt, max(20, room - 4 - min(len(answer), 22)))
        answer = _cut(answer, room - len(prompt) - 4)
        lines.append(head + f"{prompt} -> {answer}"[:room])
        if not r.ok:
            lines += textwrap.wrap(r.error, WIDTH, initial_indent="     ", subsequent_indent="       ")
    ok = sum(1 for r in results if r.ok)
    lines.append(f"{ok}/{len(results)} checks passed")
    return "\n".join(lines)
