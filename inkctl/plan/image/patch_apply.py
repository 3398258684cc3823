"""Apply exact-text edits and unified diffs to files, strictly: no fuzz, no offsets.

This file has two lives. ``inkctl lock`` imports it to compute what a patched file will
hash to; ``inkctl build`` ships it verbatim in the build context, where it runs inside the
base image with the image's own python3 (3.6 or newer, standard library only) when the image
lacks GNU ``patch``. Keep it self-contained: no inkctl imports, no f-string '=' specifiers.

Usage inside the image::

    python3 patch_apply.py edit PATH EDITS.json     # [{"old": "...", "new": "..."}, ...]
    python3 patch_apply.py diff ROOT PATCH.diff     # paths in the diff are stripped of one part (-p1)

A failure prints one line starting with ``inkctl-build:`` and exits 1.
"""

import json
import os
import re
import sys

PREFIX = "inkctl-build: "


class PatchError(Exception):
    """A patch does not apply; the message names the file and the part that failed."""


def _first_line(text):
    line = text.split("\n", 1)[0]
    return line if len(line) <= 60 else line[:57] + "..."


def count_matches(data, old):
    """Occurrences of ``old`` in ``data``, overlapping ones included."""
    n, i = 0, data.find(old)
    while i != -1:
        n += 1
        i = data.find(old, i + 1)
    return n


def apply_edits(path, data, edits):
    """``edits``: [(old, new), ...] as str; ``data``: bytes. Each old must occur exactly once."""
    for i, (old, new) in enumerate(edits):
        o = old.encode("utf-8")
        n = count_matches(data, o)
        if n != 1:
            raise PatchError("%s: edit %d (old begins %r) matched %d times; it must match exactly once"
                             % (path, i, _first_line(old), n))
        data = data.replace(o, new.encode("utf-8"), 1)
    return data


# --- unified diffs ----------------------------------------------------------------------

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _strip(name, strip):
    name = name.split(b"\t", 1)[0].strip()
    if name == b"/dev/null":
        return None
    parts = name.split(b"/")
    return b"/".join(parts[strip:]).decode("utf-8")


def parse_diff(text, strip=1):
    """bytes -> [(old_path | None, new_path | None, hunks)]; a hunk is (old_start, lines), each
    line a (tag, bytes-with-newline-or-not) with tag in ' -+'."""
    files, lines, i = [], text.split(b"\n"), 0
    if lines and lines[-1] == b"":
        lines.pop()
    while i < len(lines):
        if not (lines[i].startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ ")):
            i += 1
            continue
        old, new = _strip(lines[i][4:], strip), _strip(lines[i + 1][4:], strip)
        i += 2
        hunks = []
        while i < len(lines) and lines[i].startswith(b"@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise PatchError("malformed hunk header %r" % lines[i].decode("utf-8", "replace"))
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            i += 1
            body: list[tuple[str, bytes]] = []
            seen_old, seen_new = 0, 0
            while i < len(lines) and (seen_old < old_len or seen_new < new_len or lines[i].startswith(b"\\")):
                line = lines[i]
                if line.startswith(b"\\"):  # "\ No newline at end of file": the previous line has none
                    if body:
                        tag, content = body[-1]
                        body[-1] = (tag, content[:-1] if content.endswith(b"\n") else content)
                    i += 1
                    continue
                mark, text = line[:1] or b" ", line[1:] + b"\n"
                if mark not in (b" ", b"-", b"+"):
                    raise PatchError("unexpected line in hunk: %r" % line.decode("utf-8", "replace"))
                seen_old += mark in (b" ", b"-")
                seen_new += mark in (b" ", b"+")
                body.append((mark.decode(), text))
                i += 1
            hunks.append((int(m.group(1)), body))
        files.append((old, new, hunks))
    if not files:
        raise PatchError("the diff changes no file (expected '--- a/...' and '+++ b/...' lines)")
    return files


def apply_hunks(path, data, hunks):
    """Apply hunks to ``data`` (bytes) at exactly the lines they name."""
    src = data.splitlines(True)
    out, pos = [], 0
    for n, (start, body) in enumerate(hunks):
        at = max(start - 1, 0) if any(t != "+" for t, _ in body) else start
        expect = [c for t, c in body if t != "+"]
        if at < pos or src[at:at + len(expect)] != expect:
            raise PatchError("%s: hunk %d (at line %d) does not apply: the file differs from the diff's context"
                             % (path, n + 1, start))
        out.extend(src[pos:at])
        out.extend(c for t, c in body if t != "-")
        pos = at + len(expect)
    out.extend(src[pos:])
    return b"".join(out)


def apply_diff(root, diff, read, write, remove):
    """Apply a parsed or raw unified diff under ``root`` with the given file operations."""
    files = parse_diff(diff) if isinstance(diff, bytes) else diff
    for old, new, hunks in files:
        rel = new if new is not None else old
        path = os.path.join(root, rel)
        data = b"" if old is None else read(path)
        result = apply_hunks(path, data, hunks)
        if new is None:
            remove(path)
        else:
            write(path, result)


def diff_targets(diff, root="/"):
    """Paths (inside the image) a diff changes, in order."""
    return [os.path.join(root, new if new is not None else old) for old, new, _ in parse_diff(diff)]


# --- command line (inside the image) ----------------------------------------------------

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise PatchError("%s: cannot read: %s" % (path, e.strerror))


def _write(path, data):
    d = os.path.dirname(path)
    if d and not os.path.isdir(d):
        os.makedirs(d)
    with open(path, "wb") as f:  # in place: the file keeps its mode and owner
        f.write(data)


def main(argv):
    try:
        if len(argv) == 3 and argv[0] == "edit":
            with open(argv[2], "rb") as f:
                edits = [(e["old"], e["new"]) for e in json.loads(f.read().decode("utf-8"))]
            _write(argv[1], apply_edits(argv[1], _read(argv[1]), edits))
        elif len(argv) == 3 and argv[0] == "diff":
            apply_diff(argv[1], _read(argv[2]), _read, _write, os.remove)
        else:
            sys.stderr.write("usage: patch_apply.py edit PATH EDITS.json | diff ROOT PATCH.diff\n")
            return 2
    except PatchError as e:
        sys.stderr.write(PREFIX + str(e) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
