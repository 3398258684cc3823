"""Checks across fields, the ones a careful reviewer of a recipe would make.

Each returns a Problem with the field path it is about; the loader adds file:line.
Errors stop validation; warnings pass unless ``--strict``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from inkctl import runtimes
from inkctl.codes import code
from inkctl.errors import Problem, counted
from inkctl.recipe.fields import VAR_RE

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

# a name whose words (split at '_') say secret: HF_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY; not
# VLLM_USE_FASTOKENS or TOKENIZERS_PARALLELISM, where the letters only happen to be there
SECRET_LOOKING = re.compile(r"(?:^|_)(?:TOKENS?|SECRETS?|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY)(?:_|$)", re.I)
KNOWN_KV_DTYPES = {"auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "bf16", "float16", "fp16", "float32"}


def _err(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint)


def _warn(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint, severity="warning")


RULES = {  # each check and the problem code (inkctl/codes.py) of what it finds
    "_parallelism": "parallelism", "_hardware": "hardware", "_networking": "networking", "_gpus": "gpus",
    "_env": "environment", "_mounts": "mounts", "_patches": "patches", "_pins": "unpinned", "_engine": "engine",
    "_hosts": "hosts", "_smoke": "smoke", "_engine_flags": "engine", "_speculative": "engine", "_version": "engine",
    "_disagg": "engine",
    "_api_key": "environment", "_overlap": "environment",
}


def recipe_findings(r: "Recipe") -> list[Problem]:
    from dataclasses import replace

    out: list[Problem] = []
    for name, kind in RULES.items():
        out += [p if p.code else replace(p, code=code(kind)) for p in globals()[name](r)]
    return out


def _parallelism(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.checks.parallel_rules import parallel_findings

    return parallel_findings(r)


def _hardware(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.checks.accelerator_rules import accelerator_findings

    hw, out = r.hardware, accelerator_findings(r)
    m = r.model
    if m.weights_gb and hw.memory_gib:
        per_rank_gib = m.weights_gb * 1e9 / 2**30 / r.model_shards
        if per_rank_gib > hw.memory_gib:
            out.append(_err("model.weights_gb", f"{per_rank_gib:.1f} GiB of weights per rank does not fit {hw.memory_gib} GiB per GPU", "raise tensor or pipeline parallelism, or use more hosts"))
        elif per_rank_gib > 0.9 * hw.memory_gib:
            out.append(_warn("model.weights_gb", f"{per_rank_gib:.1f} GiB of weights per rank leaves less than 10% of {hw.memory_gib} GiB for KV cache and load transients", "\"Inkling on Two DGX Sparks\": the NVFP4 load transient on GB10 took ~2.5x the streamed bytes; keep the watchdog on"))
    if m.context_length and r.engine.args.max_model_len and r.engine.args.max_model_len > m.context_length:
        out.append(_err("engine.args.max_model_len", f"{r.engine.args.max_model_len} exceeds the model's context_length {m.context_length}"))
    return out


def every_host_ifname(hosts) -> bool:
    """Every host names its NCCL/Gloo interface (nccl_socket_ifname): no recipe-wide one needed."""
    return bool(hosts) and all(h.nccl_socket_ifname for h in hosts)


def _networking(r: "Recipe") -> list[Problem]:
    c, out = r.container, []
    if r.multinode and c.network != "host":
        out.append(_err("container.network", f"a {r.hardware.nodes}-node deployment needs host networking, not {c.network!r}", "set container.network: host (ranks talk NCCL across hosts)"))
    if r.multinode and not (r.network.socket_ifname or r.network.rdma or r.network.ib_hca or every_host_ifname(r.hosts)):
        out.append(_warn("network.socket_ifname", "multi-node without an NCCL/Gloo interface: NCCL picks one itself and may pick the wrong one", "set network.socket_ifname or each host's nccl_socket_ifname"))
    port = r.engine.args.port
    if c.network == "bridge":
        if not any(p.container == port for p in c.ports):
            out.append(_err("container.ports", f"the engine listens on {port} but no port publishes it", f"add {{host: {port}, container: {port}}}"))
    elif c.ports:
        out.append(_warn("container.ports", "ports are ignored with host networking", "remove them, or use network: bridge"))
    seen: dict[int, int] = {}
    for i, p in enumerate(c.ports):
        if p.host in seen:
            out.append(_err(f"container.ports[{i}].host", f"host port {p.host} is published twice"))
        seen[p.host] = i
    if r.network.rdma and c.network != "host":
        out.append(_err("network.rdma", "RDMA needs host networking", "set container.network: host"))
    return out


def _gpus(r: "Recipe") -> list[Problem]:
    c, out = r.container, []
    out += runtimes.get(c.runtime).findings(c.gpus, c.security_opt)  # what only its runtime says
    if c.gpus == "none":
        out.append(_warn("container.gpus", "the container gets no GPU"))
    for where, env in (("container.env", c.env), ("network.nccl_env", r.network.nccl_env)):
        if "NVIDIA_VISIBLE_DEVICES" in env and c.gpus in ("all", "cdi"):
            flag = "--gpus" if c.gpus == "all" else "--device nvidia.com/gpu=..."
            out.append(_err(f"{where}.NVIDIA_VISIBLE_DEVICES",
                            f"the runtime's {flag} sets NVIDIA_VISIBLE_DEVICES in the container and overrides this value: "
                            "the engine would see other GPUs than the recipe says",
                            "remove it and give each host its GPU indices in the inventory (gpus: '0,1' becomes "
                            "--gpus '\"device=0,1\"' or --device nvidia.com/gpu=0 ...), or set container.gpus: none "
                            "to manage devices yourself"))
    return out


def _env(r: "Recipe") -> list[Problem]:
    out = []
    env = r.container.env
    for k, v in env.items():
        if k in r.secrets:
            out.append(_err(f"container.env.{k}", f"{k} is also a secret", "keep it in secrets only"))
        elif SECRET_LOOKING.search(k) and v and not VAR_RE.fullmatch(v):
            out.append(_err(f"container.env.{k}", f"{k} looks like a secret but has a literal value in the recipe", f"move it to secrets: {{{k}: {{env: {k}}}}}"))
        for name in VAR_RE.findall(v):
            if name.startswith("SECRET_"):
                out.append(_err(f"container.env.{k}", "secrets cannot be interpolated into env values", "declare the variable under secrets"))
        if "\n" in k:
            out.append(_err(f"container.env.{k}", "a variable name cannot contain a newline"))
    for k, s in r.secrets.items():
        if bool(s.env) == bool(s.file):
            out.append(_err(f"secrets.{k}", "give exactly one of env or file", f"e.g. {k}: {{env: {k}}}"))
    for k in r.network.nccl_env:
        if k in env:
            out.append(_err(f"network.nccl_env.{k}", f"{k} is set in container.env too", "set it in one place"))
    return out


def _mounts(r: "Recipe") -> list[Problem]:
    out: list[Problem] = []
    targets: dict[str, str] = {}
    items = [(f"container.mounts[{i}].target", m.target) for i, m in enumerate(r.container.mounts)]
    items += [(f"container.volumes[{i}].target", v.target) for i, v in enumerate(r.container.volumes)]
    for path, t in items:
        key = t.rstrip("/") or "/"
        if key in targets:
            out.append(_err(path, f"{t} is already mounted by {targets[key]}"))
        targets.setdefault(key, path)
        if key.startswith("/inkctl"):
            out.append(_err(path, "/inkctl is reserved for inkctl's hotfix wrapper"))
    return out


def _patches(r: "Recipe") -> list[Problem]:
    p, out = r.patches, []
    if p.mode == "build":
        if not p.base:
            out.append(_err("patches.base", "mode 'build' needs a base image", "e.g. base: repo/image:tag@sha256:<digest>"))
        elif "@sha256:" not in p.base:
            out.append(_warn("patches.base", "the base image is not pinned by digest", "append @sha256:<digest>, or run `inkctl lock`"))
        if not p.files:
            out.append(_err("patches.files", "mode 'build' needs at least one file patch"))
        if r.engine.image.pull:
            out.append(_err("engine.image.pull", "a built image cannot be pulled", "set pull: false"))
    elif p.files:
        out.append(_err("patches.files", f"file patches need mode 'build', not {p.mode!r}"))
    if p.mode == "at_start" and not p.hotfixes:
        out.append(_err("patches.hotfixes", "mode 'at_start' needs at least one hotfix"))
    elif p.mode != "at_start" and p.hotfixes:
        out.append(_err("patches.hotfixes", f"hotfixes need mode 'at_start', not {p.mode!r}"))
    if p.mode == "prebuilt" and not p.included:
        out.append(_warn("patches.included", "a prebuilt patched image should list the changes it carries"))
    names: set[str] = set()
    for i, h in enumerate(p.hotfixes):
        if h.name in names:
            out.append(_err(f"patches.hotfixes[{i}].name", f"hotfix {h.name!r} appears twice"))
        names.add(h.name)
    for i, f in enumerate(p.files):
        if f.kind != "diff" and f.path is None:
            out.append(_warn(f"patches.files[{i}].path", "the file's path inside the image is not known: the image cannot be built", "find it in the base image and set path"))
    return out


def _pins(r: "Recipe") -> list[Problem]:
    out = []
    if r.engine.image.digest is None and r.patches.mode != "build":
        out.append(_warn("engine.image.digest", f"image {r.engine.image.ref} is not pinned by digest", "set digest: sha256:<64 hex>, or run `inkctl lock` to pin what the hosts have"))
    for i, h in enumerate(r.patches.hotfixes):
        if h.sha256 is None:
            out.append(_warn(f"patches.hotfixes[{i}].sha256", f"hotfix {h.name} is not pinned", "set sha256, or run `inkctl lock`"))
    for i, f in enumerate(r.patches.files):
        if f.kind == "diff":
            for j, t in enumerate(f.files):
                for side in ("before", "after"):
                    if getattr(t, f"sha256_{side}") is None:
                        out.append(_warn(f"patches.files[{i}].files[{j}].sha256_{side}", f"{t.path} is not pinned ({side})", "run `inkctl lock`"))
            continue
        for side in ("before", "after"):
            full, prefix = getattr(f, f"sha256_{side}"), getattr(f, f"sha256_{side}_prefix")
            if full is None:
                known = f" (the recipe's provenance gives only {prefix}...)" if prefix else ""
                out.append(_warn(f"patches.files[{i}].sha256_{side}", f"sha256 {side} patching is not pinned{known}", "set it, or run `inkctl lock`"))
            elif prefix and not full.startswith(prefix):
                out.append(_err(f"patches.files[{i}].sha256_{side}", f"{full} does not start with the stated prefix {prefix}"))
    for i, u in enumerate(r.engine.args.unresolved):
        out.append(_warn(f"engine.args.unresolved[{i}]", f"{u.flag} is not passed: {u.why}", "add the flag with its value to engine.args.extra once known"))
    return out


def _engine(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.engine_registry import spec_of

    a, out, engine = r.engine.args, [], spec_of(r.engine.kind)
    if a.kv_cache_dtype and a.kv_cache_dtype not in KNOWN_KV_DTYPES:
        out.append(_warn("engine.args.kv_cache_dtype", f"unknown KV cache dtype {a.kv_cache_dtype!r}", f"known: {', '.join(sorted(KNOWN_KV_DTYPES))}"))
    if a.enforce_eager:
        out.append(_warn("engine.args.enforce_eager", "CUDA graphs are off: decode throughput drops"))
    out += [p for i, x in enumerate(a.extra) if (p := _extra_flag(r, i, x.split("=", 1)[0])) is not None]
    return out + engine.engine_findings(r)


def _extra_flag(r: "Recipe", i: int, flag: str) -> Problem | None:
    """engine.args.extra[i]: a flag inkctl writes itself, another engine's, or one a typed field passes already."""
    from inkctl.recipe.checks.engine_flags import other_engines_flag, set_by_inkctl, typed_flags
    from inkctl.recipe.engine_registry import spec_of

    kind, path = r.engine.kind, f"engine.args.extra[{i}]"
    foreign = None if set_by_inkctl(kind, flag) else other_engines_flag(kind, flag)
    passed = typed_flags(kind, r.engine.args)
    if set_by_inkctl(kind, flag):  # the same words as a flag read off the plan (engines/_common.flag_findings)
        spec = spec_of(kind)
        field = spec.field_of(flag)
        return _err(path, f"{flag} is already in the planned argv: given again, {spec.name} keeps the last one without "
                    "a word", f"remove it; set {field} instead" if field else "remove it; the plan writes it from the recipe's fields")
    if foreign is not None:
        other, field = foreign
        mine, theirs = spec_of(kind), spec_of(other)
        own = mine.flag_of.get(field or "", (None,))[0]
        hint = (f"use engine.args.{field} ({mine.name}'s {own})" if field and own else
                f"remove it, or use {mine.name}'s own flag for this")
        article = "an" if theirs.name[:1].upper() in "AEFHILMNORSX" else "a"
        return _err(path, f"{flag} is {article} {theirs.name} flag: {mine.name} refuses it at start", hint)
    if flag in passed:
        return _err(path, f"{flag} is already passed by engine.args.{passed[flag]}: "
                    "it would be in the argv twice", "remove it from extra")
    return None


def _api_key(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.checks.apikey_rules import api_key_findings

    return api_key_findings(r)


def _overlap(r: "Recipe") -> list[Problem]:
    """A setting given twice in two ways (the engine's own: an old variable beside the flag that replaced it)."""
    from inkctl.recipe.engine_registry import spec_of

    return spec_of(r.engine.kind).overlap_findings(r)


def _engine_flags(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.checks.engine_versions import engine_flag_findings

    return engine_flag_findings(r)


def _version(r: "Recipe") -> list[Problem]:
    """An imported recipe whose image names no release says so (recipe/foreign/convert.py): nothing is
    checked against a release until the version is set."""
    out = []
    if r.engine.version.strip().lower().startswith("unknown"):
        out.append(_warn("engine.version", f"engine.version {r.engine.version!r} names no release: flags are not "
                         "checked against one", "set engine.version to the release the image runs, e.g. v0.19.1"))
    from inkctl.recipe.engine_registry import spec_of

    engine = spec_of(r.engine.kind)
    if r.model.served_aliases and not engine.served_aliases:
        out.append(_err("model.served_aliases", f"{engine.name} serves one name (--served-model-name)", "keep served_name only"))
    return out


def _speculative(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.engine_registry import spec_of

    spec = r.speculative
    if spec is None:
        return []
    out = spec_of(r.engine.kind).speculative_findings(r)
    needs_draft = spec.method.lower() in ("eagle", "eagle3", "draft_model", "standalone")
    if needs_draft and spec.draft is None:
        out.append(_err("speculative.draft", f"method {spec.method} needs a draft model", "set speculative.draft.repo"))
    if spec.draft is not None and spec.draft.repo == r.model.repo:
        out.append(_err("speculative.draft.repo", "the draft is the served model itself", "name the draft's own repository"))
    return out


def _disagg(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.checks.disagg_rules import disagg_findings

    return disagg_findings(r)


def _hosts(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.hosts import host_findings

    if r.hosts is None:
        return []
    out = host_findings(r.hosts, "hosts")
    if len(r.hosts) != r.hardware.nodes:
        out.append(_err("hosts", f"{counted(len(r.hosts), 'host')} listed but hardware.nodes is {r.hardware.nodes}"))
    want = r.hardware.gpus_per_host
    for i, h in enumerate(r.hosts):
        if h.gpus and len(h.gpus.split(",")) != want:
            out.append(_err(f"hosts[{i}].gpus", f"host {h.name}: gpus {h.gpus!r} selects {counted(len(h.gpus.split(',')), 'GPU')} "
                            f"but hardware.gpus_per_host is {want}", "list exactly gpus_per_host GPU indices"))
    return out


def _smoke(r: "Recipe") -> list[Problem]:
    if r.smoke.enabled and not r.smoke.prompts:
        return [_err("smoke.prompts", "smoke is enabled but has no prompts", "add a prompt or set smoke.enabled: false")]
    return []
