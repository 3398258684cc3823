"""Did an answer pass its smoke check? Pure: an ``Output`` and a ``SmokeCheck`` in, a reason out."""

from __future__ import annotations

import json
import re

from inkctl.client.stream import Output
from inkctl.plan.smoke import SmokeCheck


def shown(text: str, n: int = 120) -> str:
    t = " ".join(text.split())
    return repr(t if len(t) <= n else t[:n] + "...")


def verdict(check: SmokeCheck, out: Output) -> str:
    """'' when the answer passes, else what is wrong with what came back."""
    if not out.ok:
        return out.error
    if check.kind == "reasoning":
        if not out.reasoning.strip():
            return ("no reasoning came back in its own field (reasoning_content or reasoning); the answer was "
                    f"{shown(out.text)}: is the engine started with a reasoning parser?")
        return ""
    if check.kind == "tools":
        return _tool_verdict(check, out)
    answer = out.text.strip()
    if not answer:
        if out.reasoning:
            return (f"empty answer: only reasoning came back ({shown(out.reasoning)}); raise max_tokens "
                    f"({check.max_tokens}) so the model can finish")
        return "empty answer"
    if check.contains is not None and check.contains not in answer:
        return f"expected the answer to contain {check.contains!r}, got {shown(answer)}"
    if check.regex is not None and not re.search(check.regex, answer):
        return f"expected the answer to match /{check.regex}/, got {shown(answer)}"
    if check.one_of is not None:
        norm = answer.rstrip(".").strip().lower()
        if norm not in {x.lower() for x in check.one_of}:
            return f"expected one of {', '.join(repr(x) for x in check.one_of)}, got {shown(answer)}"
    return ""


def _tool_verdict(check: SmokeCheck, out: Output) -> str:
    tool = json.loads(check.tool or "{}").get("function", {})
    if not out.tool_calls:
        return f"no tool call came back (finish_reason {out.finish_reason!r}); the answer was {shown(out.text)}"
    call = out.tool_calls[0]
    fn = call.get("function") or {}
    if fn.get("name") != tool.get("name"):
        return f"the tool call names {fn.get('name')!r}, not {tool.get('name')!r}"
    raw = fn.get("arguments", "")
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as e:
        return f"the tool call's arguments do not parse as JSON ({e.msg} at char {e.pos}): {shown(raw)}"
    if not isinstance(args, dict):
        return f"the tool call's arguments are not a JSON object: {shown(raw)}"
    missing = [k for k in (tool.get("parameters") or {}).get("required", []) if k not in args]
    if missing:
        return f"the tool call's arguments lack required field(s) {', '.join(missing)}: {shown(raw)}"
    return ""
