"""Stable codes for every problem `inkctl validate` reports, for CI rules and for docs links.

A code never changes meaning once released; a retired code is not reused. The table in
docs/problem-codes.md is generated from this one (``python3 -m inkctl.codes``); a test keeps
it current and the codes unique.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str  # INKnnn
    name: str  # kebab-case, what the problem is
    meaning: str
    fix: str  # what to do, when the problem itself carries no more precise hint


CODES: tuple[Code, ...] = (
    # reading the file
    Code("INK001", "unreadable-file", "The file does not exist, is a directory, or cannot be read.", "check the path"),
    Code("INK002", "invalid-text", "The file is not UTF-8, or holds a character YAML does not allow.",
         "save the file as UTF-8 and remove control characters"),
    Code("INK003", "yaml-syntax", "The file is not valid YAML.", "fix the YAML at the position shown"),
    Code("INK004", "tab-indent", "A tab character is used for indentation.", "YAML indents with spaces: replace the tab"),
    Code("INK005", "bad-alias", "An alias (*name) is undefined or refers to a node that contains it.",
         "define the anchor (&name) before the alias, and never inside the node it names"),
    Code("INK006", "too-large", "The document nests too deeply or expands to too many values through aliases.",
         "remove the nested aliases; a recipe is a few hundred values"),
    Code("INK007", "many-documents", "The file holds more than one YAML document.", "keep one document per file"),
    Code("INK008", "not-a-mapping", "The document is empty, or is not a mapping of fields.",
         "a recipe or an inventory is a YAML mapping of fields"),
    Code("INK009", "duplicate-key", "A mapping has the same key twice; YAML would keep only the last.", "remove one of them"),
    Code("INK010", "key-not-string", "A mapping key is a number, a list, a mapping or null.", "put the key in quotes"),
    Code("INK011", "unsupported-tag", "A value carries a YAML tag outside the core schema, or a tagged value is invalid.",
         "write plain values: strings, numbers, true/false, null, lists and mappings"),
    Code("INK012", "bad-merge", "'<<' is followed by something that is not a mapping.", "merge a mapping or a list of mappings"),
    Code("INK013", "wrong-document", "A recipe was given where an inventory was expected, or the other way round.",
         "pass the recipe as the argument and the inventory with --hosts FILE"),
    # --set
    Code("INK050", "bad-override", "A --set override is malformed or cannot be applied to the document.",
         "write --set dotted.path=value, e.g. --set engine.args.port=8001"),
    # the schema
    Code("INK101", "unknown-field", "A field the schema does not have (a typo, or a field indented under the wrong parent).",
         "fix the name, or move the field where it belongs"),
    Code("INK102", "missing-field", "A required field is missing.", "add the field"),
    Code("INK103", "wrong-type", "A value has the wrong type (a string where a number is expected, ...).",
         "write a value of the expected type"),
    Code("INK104", "invalid-choice", "A value is not one of the allowed choices.", "use one of the values listed"),
    Code("INK105", "out-of-range", "A number, a length or a count is outside its bounds, or a string does not match its pattern.",
         "use a value within the bounds shown"),
    Code("INK106", "invalid-value", "A value fails a check of its own (a name, a path, a digest, ...).",
         "correct the value as the message says"),
    # checks across fields
    Code("INK201", "parallelism", "tensor x pipeline x data parallel does not match the hosts' GPUs, or data/expert parallelism does not fit the engine.",
         "make tensor_parallel x pipeline_parallel equal hardware.nodes x hardware.gpus_per_host"),
    Code("INK202", "hardware", "The hardware section contradicts itself or the accelerator.", "correct the hardware section"),
    Code("INK203", "networking", "Network or NCCL settings that will not work, or will be slow.", "follow the hint"),
    Code("INK204", "gpus", "GPU selection does not agree with the hardware.", "follow the hint"),
    Code("INK205", "environment", "Container environment: secrets in clear, duplicates, unknown variables.", "follow the hint"),
    Code("INK206", "mounts", "Mounts that collide or cannot work.", "follow the hint"),
    Code("INK207", "patches", "Patches that cannot be applied or built as written.", "follow the hint"),
    Code("INK208", "unpinned", "Something the recipe trusts is not pinned by sha256 or digest.",
         "pin it in the recipe, or run `inkctl lock RECIPE`"),
    Code("INK209", "engine", "Engine flags that conflict, belong to the other engine, or are unknown, deprecated or gone in the release the recipe targets.", "follow the hint"),
    Code("INK210", "hosts", "Hosts that clash (names, addresses) or do not match hardware.nodes.", "follow the hint"),
    Code("INK211", "smoke", "Smoke-test prompts that cannot prove what they claim.", "follow the hint"),
    Code("INK220", "missing-file", "A patch or hotfix source file is not on disk.", "put the file there before build or up"),
    Code("INK230", "lock-drift", "What the lock file pinned differs from what is there now, or the lock file is unusable.",
         "restore what changed, or run `inkctl lock RECIPE` to re-pin on purpose"),
    Code("INK240", "gateway", "A gateway file's models do not fit together or on the inventory: shared GPUs, ports "
         "used twice, the same name or served model twice, hosts that are not in the inventory or do not match "
         "a recipe's hardware.nodes.", "follow the hint"),
    Code("INK099", "cannot-load", "The recipe could not be loaded for a reason outside the file itself "
         "(its inventory, its lock file, its hosts).", "follow the message"),
)

BY_CODE = {c.code: c for c in CODES}
BY_NAME = {c.name: c for c in CODES}


def code(name: str) -> str:
    """The code of a problem kind, by name (a KeyError for a name the table lacks, so tests catch typos)."""
    return BY_NAME[name].code


def markdown() -> str:
    lines = ["# Problem codes", "",
             "Every problem `inkctl validate` reports carries one of these codes (`validate -o json`: `code`,",
             "`name`, `fix`). Generated by `python3 -m inkctl.codes` from inkctl/codes.py; do not edit by hand.", "",
             "| code | name | meaning | default fix |", "|---|---|---|---|"]
    for c in CODES:
        lines.append(f"| {c.code} | {c.name} | {c.meaning} | {c.fix} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
