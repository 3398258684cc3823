"""An argv as copy-pasteable shell text on a screen: quoted once, broken only before a --flag or
the image, an ``sh -c`` script continued inside its quotes."""

from __future__ import annotations

from inkctl.plan.quote import command_line

RUN_FLAGS_WITHOUT_VALUE = {"--detach", "-d", "--rm", "--init", "--privileged", "--interactive", "-i", "--tty", "-t",
                           "--read-only", "-it", "--no-healthcheck"}


def image_index(argv: tuple[str, ...]) -> int | None:
    """Where the image is in ``docker|podman run ...``: the first word that is no option nor an option's value."""
    if len(argv) < 3 or argv[1] != "run":
        return None
    i = 2
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-"):
            return i
        i += 1 if ("=" in a or a in RUN_FLAGS_WITHOUT_VALUE) else 2
    return None


def _shell(argv: tuple[str, ...], width: int = 78) -> str:
    """Copy-pasteable: one quoted command, continued with backslashes; lines break only before a
    --flag (kept with its values) or before the image, which starts its own line."""
    text = command_line(argv)
    if len(text) <= width - 6:
        return text
    from shlex import quote
    from shlex import split as shlex_split

    img = image_index(argv)
    units: list[tuple[bool, str]] = []  # (starts a line, words)
    for i, a in enumerate(argv):
        if not units or a.startswith("--") or i == img:
            units.append((i == img, quote(a)))
        else:
            units[-1] = (units[-1][0], units[-1][1] + " " + quote(a))
    limit = width - 8
    fitted: list[tuple[bool, str]] = []
    for own_line, words in units:  # a unit wider than a line: its words on lines of their own
        if len(words) <= limit:
            fitted.append((own_line, words))
            continue
        raw = shlex_split(words)
        parts = [_script(a, limit) if len(quote(a)) > limit and k and raw[k - 1] == "-c" else quote(a)
                 for k, a in enumerate(raw)]
        fitted.append((own_line, parts[0]))
        fitted += [(False, w) for w in parts[1:]]
    units = fitted
    lines: list[str] = []
    for own_line, words in units:
        if lines and not own_line and len(lines[-1]) + 1 + len(words) <= limit:
            lines[-1] += " " + words
        else:
            lines.append(words)
    return " \\\n      ".join(lines)


def _script(script: str, limit: int) -> str:
    """An ``sh -c`` script wider than a line, quoted, broken at spaces outside its own quotes with
    a backslash-newline inside the quotes: the shell that runs the script joins those lines again
    (a line continuation), so the copy runs the same script."""
    from shlex import quote

    words: list[str] = []
    cur, q, esc = "", None, False
    for ch in script:
        if esc:
            cur, esc = cur + ch, False
        elif ch == "\\" and q != "'":
            cur, esc = cur + ch, True
        elif q is not None:
            cur, q = cur + ch, (None if ch == q else q)
        elif ch in "'\"":
            cur, q = cur + ch, ch
        elif ch == " ":
            words, cur = words + [cur], ""
        else:
            cur += ch
    words.append(cur)
    lines = [""]
    for w in words:
        shown = len(quote(w))  # how wide it prints once quoted
        if lines[-1] and len(quote(lines[-1])) + 1 + shown > limit - 4:
            lines.append(w)
        else:
            lines[-1] = f"{lines[-1]} {w}" if lines[-1] else w
    return quote(" \\\n        ".join(lines))
