"""The smoke checks a recipe asks for, as plain data: what ``up`` and ``inkctl smoke`` send and
what each answer must be. Pure: no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass

# The tool the tool-call check offers; the model must call it with a JSON object that has "city".
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}


@dataclass(frozen=True)
class SmokeCheck:
    """One prompt and what must come back.

    kind: ``answer`` (content must be non-empty and meet the expectation, if any),
    ``reasoning`` (the reasoning must come back in its own field), ``tools`` (a tool call whose
    arguments parse as JSON and carry the tool's required fields)."""

    prompt: str
    kind: str = "answer"
    contains: str | None = None
    regex: str | None = None
    one_of: tuple[str, ...] | None = None
    max_tokens: int = 32
    tool: str | None = None  # the tool's JSON schema (a string: the check stays hashable)

    @property
    def expectation(self) -> str:
        if self.kind == "reasoning":
            return "reasoning in its own field"
        if self.kind == "tools":
            return "a tool call with JSON arguments"
        if self.contains is not None:
            return f"contains {self.contains!r}"
        if self.regex is not None:
            return f"matches /{self.regex}/"
        if self.one_of is not None:
            return "one of " + ", ".join(repr(x) for x in self.one_of)
        return "a non-empty answer"

    def as_dict(self) -> dict:
        d: dict = {"prompt": self.prompt, "kind": self.kind, "expect": self.expectation, "max_tokens": self.max_tokens}
        if self.tool:
            d["tool"] = json.loads(self.tool)
        return d


def smoke_checks(recipe) -> tuple[SmokeCheck, ...]:
    """The checks of ``recipe.smoke``, then one per declared capability."""
    s = recipe.smoke
    out = []
    for p in s.prompts:
        if isinstance(p, str):
            out.append(SmokeCheck(prompt=p, max_tokens=s.max_tokens))
        else:
            out.append(SmokeCheck(prompt=p.prompt, contains=p.contains, regex=p.regex,
                                  one_of=tuple(p.one_of) if p.one_of is not None else None,
                                  max_tokens=p.max_tokens or s.max_tokens))
    if s.capabilities and recipe.capabilities.reasoning:
        out.append(SmokeCheck(prompt=s.reasoning_prompt, kind="reasoning", max_tokens=s.reasoning_max_tokens))
    if s.capabilities and recipe.capabilities.tools:
        out.append(SmokeCheck(prompt=s.tool_prompt, kind="tools", max_tokens=max(s.max_tokens, 256),
                              tool=json.dumps(WEATHER_TOOL, sort_keys=True)))
    return tuple(out)
