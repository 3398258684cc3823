"""``inkctl recipes`` as text: a few lines a recipe on an 80-column screen."""

from __future__ import annotations


def recipe_listing(rows: list[dict], width: int = 80) -> str:
    """Two or three lines a recipe on an 80-column screen: the name (what plan, up and init take,
    never cut) and its model; then hardware, engine, parallelism, runtime, patches and status."""
    import textwrap

    name_w = max([len(r["recipe"]) for r in rows] + [6])
    out = [f"{'recipe':<{name_w}}  model", "    hardware; engine, parallelism; runtime; patches; status", ""]
    for r in rows:
        if "error" in r:
            out.append(f"{r['recipe']:<{name_w}}  {r['error']}")
            continue
        out.append(f"{r['recipe']:<{name_w}}  {r['model']}".rstrip())
        what = (f"{r['hardware']}; {r['engine']}, {r['parallel']}; {r['runtime']}; patches {r['patches']}; "
                f"{r['status']}")
        out += textwrap.wrap(what, width - 2, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(out)
