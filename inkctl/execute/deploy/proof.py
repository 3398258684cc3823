"""The engine's own word on every argv, before anything starts: each rank's exact argv and
environment is read by the engine's own parser and pre-checks inside the recipe's image on its
host (a throwaway container: no network, no GPU), as far as they go without a GPU or the
weights. A verdict is kept by what it was made of (the image id, the argv, the environment, the
program: ``RankArgv.key``) in the local cache and in the lock file, so the same plan on the same
image is proven once.

Verdicts: ``ok`` (the engine read it and its checks passed up to ``stage``), ``refused`` (the
engine's own message, located in the recipe by ``locate``), ``unchecked`` (nothing in the image
could read it: a custom entrypoint, no python3, a hotfix that needs the GPU...; said, never
failed)."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.plan.proof import RankArgv, program_input, proof_run

log = logging.getLogger(__name__)

MARK = "@@INKCTL-PROOF "
TIMEOUT_S = 300.0  # a real engine's imports (torch, the engine) on a cold page cache
OK, REFUSED, UNCHECKED = "ok", "refused", "unchecked"


@dataclass
class Verdict:
    host: str
    rank: int
    role: str
    verdict: str
    message: str = ""
    stage: str = ""
    engine: str = ""
    version: str | None = None
    where: str = ""
    notes: list[str] = field(default_factory=list)
    key: str = ""
    argv_key: str = ""
    image: str = ""
    seconds: float = 0.0
    source: str = "image"  # image (asked now), cache, lock

    @property
    def who(self) -> str:
        return f"rank {self.rank} ({self.role})"

    def engine_text(self) -> str:
        return " ".join(x for x in (self.engine, self.version) if x) or "the engine"

    def record(self) -> dict:
        out = asdict(self)
        out.pop("source")
        return out


@functools.cache
def program(kind: str) -> bytes | None:
    """The engine's proof program (its spec's ``proof_program``: one self-contained file the
    image's python3 runs), or None where the engine has none."""
    from inkctl.recipe.engine_registry import spec_of

    return spec_of(kind).proof_program()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inkctl" / "proof"


def cached(key: str) -> dict | None:
    try:
        doc = json.loads((cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("key") == key else None


def keep(v: Verdict) -> None:
    """Kept only when the engine said something (ok or refused): an unchecked one is asked again."""
    if v.verdict == UNCHECKED:
        return
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{v.key}.{os.getpid()}.tmp"
        text = json.dumps(v.record(), sort_keys=True)
        for name in (f"{v.key}.json", f"argv-{v.argv_key}.json"):  # by what it was made of; by the argv alone (plan)
            tmp.write_text(text)
            tmp.replace(d / name)
    except OSError as e:
        log.debug("proof cache not written: %s", e)


def _from(doc: dict, r: RankArgv, source: str) -> Verdict:
    fields = {k: doc[k] for k in ("verdict", "message", "stage", "engine", "version", "where", "notes", "key",
                                  "argv_key", "image") if k in doc}
    return Verdict(host=r.host, rank=r.rank, role=r.role, source=source, **fields)


def prove_rank(r: RankArgv, kind: str, t: Transport, image_id: str, pinned: dict[str, dict]) -> Verdict:
    """One engine process's verdict: from the lock file's pins, the cache, or the image."""
    prog = program(kind)
    if prog is None:
        return Verdict(r.host, r.rank, r.role, UNCHECKED, f"inkctl has no argv proof for engine {kind!r}")
    key, argv_key = r.key(image_id, prog), r.argv_key(prog)
    if key in pinned:
        return _from(pinned[key], r, "lock")
    doc = cached(key)
    if doc is not None:
        return _from(doc, r, "cache")
    t0 = time.monotonic()
    name = f"inkctl-proof-{key[:12]}-{os.getpid()}"
    try:
        res = t.run(proof_run(r, name), stdin=program_input(r, prog), timeout=TIMEOUT_S)
    except HostError as e:
        return Verdict(r.host, r.rank, r.role, UNCHECKED, f"the proof container did not answer: {e.reason}",
                       key=key, argv_key=argv_key, image=image_id)
    v = _verdict(r, res.text(), res.err_text(), res.exit_code)
    v.key, v.argv_key, v.image, v.seconds = key, argv_key, image_id, round(time.monotonic() - t0, 2)
    keep(v)
    return v


def _verdict(r: RankArgv, out: str, err: str, code: int) -> Verdict:
    line = next((ln for ln in reversed(out.splitlines()) if MARK in ln), None)
    if line is None:
        return Verdict(r.host, r.rank, r.role, UNCHECKED, _no_answer(err, code))
    doc = json.loads(line[line.index(MARK) + len(MARK):])
    return _from(doc, r, "image")


def _no_answer(err: str, code: int) -> str:
    """Why the image gave no verdict: the runtime's or the interpreter's last word."""
    last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), f"exit {code}")
    if "python3" in last and ("not found" in last or "no such file" in last.lower()):
        return "the image has no python3, so no engine in it could be asked (a custom entrypoint?)"
    return f"the proof program gave no verdict: {last[:300]}"


def locate(v: Verdict, extra: list[str] | dict[str, list[str]], fields: dict[str, str]) -> str:
    """Where in the recipe the refused flag came from: an ``engine.args.extra`` (``head_extra``,
    ``worker_extra``) item, or the typed field that makes it (``fields``: flag -> field path), or
    the plan itself. ``extra``: the items by field name (a list: ``extra``'s)."""
    text = f"{v.message} {v.where}"
    named = set(re.findall(r"--[A-Za-z0-9][A-Za-z0-9_-]*", text))
    named |= {"--" + w.replace("_", "-") for w in re.findall(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b", text)}
    lists = {"extra": extra} if isinstance(extra, list) else extra
    for name, items in lists.items():
        for i, item in enumerate(items):
            if item.split("=", 1)[0] in named:
                return f"engine.args.{name}[{i}] ({item.split('=', 1)[0]})"
    for flag in sorted(named):
        if flag in fields:
            return f"{fields[flag]} ({flag})"
    return ""


@dataclass(frozen=True)
class HostProof:
    """One host's verdicts, summed up as a preflight row: status (ok, warn, fail), detail, hint."""

    verdicts: tuple[Verdict, ...]
    status: str
    detail: str
    hint: str | None = None


def prove_host(recipe, plan, host: str, t: Transport, image_id: str, pinned: dict[str, dict]) -> HostProof:
    """Every engine process ``plan`` starts on ``host``, read by the engine in the image."""
    from inkctl.plan.proof import rank_argvs
    from inkctl.recipe.checks.engine_flags import typed_flags

    mine = [r for r in rank_argvs(plan, recipe) if r.host == host]
    if not mine:
        return HostProof((), "ok", "no engine process on this host")
    verdicts = tuple(prove_rank(r, recipe.engine.kind, t, image_id, pinned) for r in mine)
    refused = [v for v in verdicts if v.verdict == REFUSED]
    if refused:
        v = refused[0]
        fields = {f: f"engine.args.{name}" for f, name in typed_flags(recipe.engine.kind, recipe.engine.args).items()}
        a = recipe.engine.args
        own = "head_extra" if v.rank == 0 else "worker_extra"
        where = locate(v, {"extra": list(a.extra), own: list(getattr(a, own))}, fields)
        detail = f"{v.who}: {v.engine_text()} refused its argv: {v.message}"
        hint = (f"from {where}: " if where else "") + "fix the recipe, or waive with --skip-check argv if the image is wrong"
        return HostProof(verdicts, "fail", detail, hint)
    unchecked = [v for v in verdicts if v.verdict == UNCHECKED]
    if unchecked:
        v = unchecked[0]
        return HostProof(verdicts, "warn", f"{v.who}: not checked: {v.message}")
    return HostProof(verdicts, "ok", _accepted(verdicts))


def _accepted(verdicts: tuple[Verdict, ...]) -> str:
    v = verdicts[0]
    n = len(verdicts)
    what = f"{n} argv" if n > 1 else "the argv"
    sources = sorted({x.source for x in verdicts})
    how = {"image": f"asked in {sum(x.seconds for x in verdicts):.1f} s", "cache": "kept verdict",
           "lock": "pinned in the lock file"}
    return f"{v.engine_text()} read {what} (checked up to {v.stage}; {', '.join(how[s] for s in sources)})"


def known(r: RankArgv, kind: str, pinned: dict[str, dict]) -> Verdict | None:
    """The last verdict on exactly this argv, whatever the image (``plan`` shows it): pinned in
    the lock file, else kept on this machine; None when the engine was never asked."""
    prog = program(kind)
    if prog is None:
        return None
    argv_key = r.argv_key(prog)
    for doc in pinned.values():
        if doc.get("argv_key") == argv_key:
            return _from(doc, r, "lock")
    try:
        doc = json.loads((cache_dir() / f"argv-{argv_key}.json").read_text())
    except (OSError, ValueError):
        return None
    return _from(doc, r, "cache") if isinstance(doc, dict) and doc.get("argv_key") == argv_key else None


def said(v: Verdict) -> str:
    """One line for ``plan``: what the engine said of this argv, and in which image."""
    where = {"lock": "pinned in the lock file", "cache": "kept on this machine"}.get(v.source, "")
    word = {OK: "accepted", REFUSED: "REFUSED", UNCHECKED: "not checked"}.get(v.verdict, v.verdict)
    text = f"{word} by {v.engine_text()} in image {v.image[:19]}" if v.image else f"{word} by {v.engine_text()}"
    if v.verdict == REFUSED and v.message:
        text += f": {v.message}"
    return f"{text} ({where})" if where else text
