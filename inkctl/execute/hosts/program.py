"""A program inkctl runs on hosts, as the one file a host gets: the module's text with the
shared host-side part (``hostside.py``) in place of the line that imports it. Here, on the
control machine and in tests, the same modules import each other as usual; on a host, where
nothing of inkctl is installed, the one file has it all."""

from __future__ import annotations

import functools
import re
from pathlib import Path

HOSTSIDE = Path(__file__).with_name("hostside.py")
IMPORT = re.compile(r"^from inkctl\.execute\.hosts\.hostside import [^\n]*\n", re.M)


@functools.cache
def program(path: Path) -> bytes:
    """The bytes sent to a host for the program at ``path`` (its hash is what a host that
    has it already is compared with)."""
    text = path.read_text()
    found = IMPORT.findall(text)
    if len(found) != 1:
        raise ValueError(f"{path.name}: {len(found)} lines import hostside; a host program has exactly one")
    shared = HOSTSIDE.read_text()
    inlined = f"# -- inkctl/execute/hosts/hostside.py, inlined when sent --\n{shared}# -- end of hostside.py --\n"
    return IMPORT.sub(lambda _: inlined, text).encode()
