"""Spelling suggestions for unknown names ("did you mean ...?").

``difflib`` is imported on first use only: it is needed only when something is
already wrong, so a clean run never pays for it.
"""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice most like ``word`` (a case-only difference wins outright), or None."""
    options = [c for c in dict.fromkeys(choices) if isinstance(c, str)]
    lowered = {c.lower(): c for c in options}
    if word.lower() in lowered:
        return lowered[word.lower()]
    import difflib

    found = difflib.get_close_matches(word, options, n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint such as ``did you mean 'tensor_parallel'?``, or None when nothing is close."""
    match = closest(word, choices)
    return f"did you mean '{match}'?" if match is not None and match != word else None
