"""Make sure every host has the image the plan runs, building or delivering only what is missing.

Default: each host builds for itself, in parallel (its own architecture, its base image already
there); only the small context travels, as a gzipped tar on the stdin of ``docker build -`` /
``podman build -`` over the host's SSH connection. ``local=True``: build once on the local
daemon (docker SDK), then stream ``docker save`` into ``load`` on each host that lacks it.

The tag is content-addressed, so a host that already has it is a cache hit: nothing is built
and nothing is sent. Before anything, the lock is checked against what is here (files) and
there (images), and unpinned hotfixes are refused.
"""

from __future__ import annotations

import contextlib
import gzip
import time
from dataclasses import asdict, dataclass, field

from inkctl.errors import InkctlError
from inkctl.execute.state.images import BuildOutcome, HostImages, ImageInfo, build_failure_lines
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl import runtimes
from inkctl.plan.image.build import BuildContext, build_context, split_digest
from inkctl.plan.step import Plan
from inkctl.recipe.lockfile import base_key, read_pins
from inkctl.recipe.reading.source import Loaded


@dataclass
class HostImage:
    host: str
    action: str  # cache-hit | built | delivered | present | failed
    image: str
    image_id: str | None = None
    bytes_sent: int = 0
    seconds: float = 0.0
    error: str = ""


@dataclass
class ImageReport:
    image: str
    mode: str  # on-host | local | none
    context_bytes: int = 0  # files in the context
    context_tar_bytes: int = 0  # the tar (uncompressed)
    context_sent_bytes: int = 0  # the gzipped tar each building host receives
    hosts: list[HostImage] = field(default_factory=list)
    local: HostImage | None = None
    seconds: float = 0.0
    pushed: str | None = None  # REGISTRY/REPO@sha256:... after ``build --push``

    def as_dict(self) -> dict:
        return asdict(self)


class _Emit:
    """Progress as the runner's typed events, to whatever sink the caller gives (or none)."""

    def __init__(self, sink):
        self.sink = sink

    def __call__(self, kind: str, host: str, purpose: str, **kw) -> None:
        if self.sink is None:
            return
        from inkctl.execute import events as ev

        t = {"start": ev.StepStarted, "done": ev.StepFinished, "fail": ev.StepFailed}.get(kind)
        if t is None:
            self.sink.emit(ev.Info(text=f"{host}: {purpose}"))
        else:
            self.sink.emit(t(host=host, rank=None, kind="image", purpose=purpose, **kw))


def ensure_image(loaded: Loaded, plan: Plan, transports: dict[str, Transport], sink=None, *,
                 local: bool = False, guard=None, inspected: dict | None = None) -> ImageReport:
    """Called by ``up`` before launching and by ``inkctl build``. Raises InkctlError (naming each
    host, file and hash) when inputs are untrusted or a build fails; returns what happened.

    Every host is probed first, in parallel; when all have the tag (a cache hit) that is all.
    ``guard`` (a callable returning a context manager, e.g. the deploy lock) is entered only
    when something must be built or delivered; the hosts are probed again inside it.
    ``inspected``: host -> (ref, Result of ``image inspect ref``) already read there (``up``'s
    combined probe): that first inspect is not asked again."""
    from inkctl.plan.inputs import require_trusted

    t0 = time.monotonic()
    emit = _Emit(sink)
    require_trusted(loaded)
    pins = read_pins(loaded)
    answered = {h: {ref: res} for h, (ref, res) in (inspected or {}).items()}
    stores = {h.name: HostImages(transports[h.name], h.runtime, answered.get(h.name)) for h in plan.hosts}
    if loaded.recipe.patches.mode != "build":
        report = ImageReport(image=loaded.recipe.engine.image.ref, mode="none")
        report.hosts = _parallel(stores, lambda s: _check_present(s, report.image, pins, emit))
    else:
        ctx = build_context(loaded, pins)
        gz = gzip.compress(ctx.tar(), mtime=0)
        report = ImageReport(image=ctx.tag, mode="local" if local else "on-host", context_bytes=ctx.size,
                             context_tar_bytes=len(ctx.tar()), context_sent_bytes=len(gz))
        done = {p.host: p for p in _parallel(stores, lambda s: _probe(ctx, s, pins, emit))}
        missing = {h: s for h, s in stores.items() if done[h].action == "missing"}
        if missing or (local and not stores):  # --local without hosts: build here only
            with (guard() if guard else contextlib.nullcontext()):
                if local:
                    _local(ctx, gz, missing, pins, emit, report, done)
                else:
                    done.update((r.host, r) for r in _parallel(missing, lambda s: _on_host(ctx, gz, s, pins, emit)))
        report.hosts = [done[h] for h in stores]
    report.seconds = round(time.monotonic() - t0, 3)
    _raise_failures(report)
    return report


def ensure_probed_image(loaded: Loaded, plan: Plan, transports: dict[str, Transport], sink, answers: dict,
                        image: str) -> ImageReport:
    """``up``'s image step on the answers to its combined probe (``state.probe.HostAnswer``): their
    image section is the first look at each host; where the image was then built or delivered,
    that section is read again, for preflight to judge."""
    from inkctl.execute.hosts.transport import Result
    from inkctl.execute.state.probe import image_section

    inspected = {}
    for h, a in answers.items():
        if a.sections is not None:
            out, err, rc = a.sections.get("image")
            inspected[h] = (image, Result(runtimes.get(plan.host(h).runtime).image_inspect(image), rc, out.encode(), err.encode(), 0.0))
    report = ensure_image(loaded, plan, transports, sink, inspected=inspected)
    stale = [h.host for h in report.hosts if h.action in ("built", "delivered") and answers[h.host].sections is not None]

    def again(host: str) -> None:
        res = transports[host].run(runtimes.get(plan.host(host).runtime).image_inspect(image), timeout=60)
        s = answers[host].sections
        s.out["image"], s.err["image"], s.rc["image"] = image_section(res)

    each(again, stale, name="image")
    return report


def _parallel(stores: dict[str, HostImages], fn) -> list[HostImage]:
    def guarded(s: HostImages) -> HostImage:
        t = time.monotonic()
        try:
            return fn(s)
        except (HostError, InkctlError) as e:
            msg = e.reason if isinstance(e, HostError) else e.message
            return HostImage(s.host, "failed", "", seconds=round(time.monotonic() - t, 3), error=msg + (f" (hint: {e.hint})" if e.hint else ""))

    return each(guarded, stores.values(), name="image")


def _raise_failures(report: ImageReport) -> None:
    failed = [h for h in report.hosts + ([report.local] if report.local else []) if h.action == "failed"]
    if not failed:
        return
    drift = [h for h in failed if h.error.startswith("lock drift")]
    lines = "\n".join(f"  {h.host}: {h.error}" for h in failed)
    raise InkctlError(f"image {report.image} is not ready on {len(failed)} host{'s' if len(failed) != 1 else ''}:\n{lines}",
                      hint="run `inkctl lock` again only if the change is intended" if drift else None,
                      exit_code=2 if drift else 1)


def _check_lock(pins: dict[str, str], ref: str, host: str, info: ImageInfo) -> None:
    want = pins.get(f"image:{ref}@{host}")
    if want and want != info.id:
        raise InkctlError(f"lock drift: pin image:{ref}@{host}: {want} -> {info.id}")
    common = pins.get(f"image:{ref}")
    if common and not info.matches(common):
        raise InkctlError(f"lock drift: pin image:{ref}: {common} -> {info.id} (on {host})")


def _check_present(s: HostImages, ref: str, pins: dict[str, str], emit) -> HostImage:
    """No build: only hold what is there against the lock (presence is preflight's job)."""
    if not any(k == f"image:{ref}" or k.startswith(f"image:{ref}@") for k in pins):
        return HostImage(s.host, "present", ref)
    info = s.inspect(ref)
    if info is None:
        return HostImage(s.host, "present", ref, error="not on the host")
    _check_lock(pins, ref, s.host, info)
    return HostImage(s.host, "present", ref, info.id)


def _cached(ctx: BuildContext, s, pins: dict[str, str]) -> ImageInfo | None:
    info = s.inspect(ctx.tag)
    if info is None:
        return None
    if info.labels.get("inkctl.content") != ctx.content_hash:
        raise InkctlError(f"{ctx.tag} exists but was not built from this context "
                          f"(label inkctl.content {info.labels.get('inkctl.content')!r}, expected {ctx.content_hash})",
                          hint=f"remove it there ({s.runtime} image rm {ctx.tag}) and run again")
    _check_lock(pins, ctx.tag, s.host, info)
    return info


def resolve_base(ctx: BuildContext, s) -> ImageInfo:
    """The base as present on the host, checked against the recipe's digest or the lock's pin.

    Nothing is pulled: a recipe's ``repo:tag@sha256:D`` matches an image whose repo digests
    include D (it was pulled by that digest) or whose image id is D (it was loaded or built
    here, so it has no repo digest). The build then uses that local image by id.
    """
    name, digest = split_digest(ctx.base)
    info = s.inspect(name) or (s.inspect(ctx.base) if digest else None)
    if info is None:
        raise InkctlError(f"base image {ctx.base} is not on this host",
                          hint=f"pull or load it there first ({s.runtime} pull {ctx.base})")
    if ctx.base_pin and not info.matches(ctx.base_pin):
        if digest:
            have = ", ".join([info.id, *sorted(info.digests)])
            raise InkctlError(f"base image {name} here is {have}, but the recipe pins {ctx.base_pin}",
                              hint="load the pinned base there, or change the digest in the recipe on purpose")
        raise InkctlError(f"lock drift: pin {base_key(ctx.base)}: {ctx.base_pin} -> {info.id}")
    return info


def build_args(base: ImageInfo) -> dict[str, str]:
    return {"INKCTL_BASE": base.raw_id, "INKCTL_USER": base.user or "0"}


def _failed_build(ctx: BuildContext, out: BuildOutcome) -> InkctlError:
    lines = build_failure_lines(out.output)
    return InkctlError("build failed: " + " | ".join(lines),
                       hint="the image was not tagged; fix the patch or its pins (see `inkctl build --emit DIR`)")


def _on_host(ctx: BuildContext, gz: bytes, s: HostImages, pins: dict[str, str], emit) -> HostImage:
    t = time.monotonic()
    emit("start", s.host, f"image {ctx.tag}")
    hit = _cached(ctx, s, pins)
    if hit is not None:
        emit("done", s.host, f"image {ctx.tag}", seconds=round(time.monotonic() - t, 3), detail="cache hit, nothing sent")
        return HostImage(s.host, "cache-hit", ctx.tag, hit.id, 0, round(time.monotonic() - t, 3))
    base = resolve_base(ctx, s)
    emit("info", s.host, f"building {ctx.tag} from {base.id[:19]}: sending {len(gz)} bytes of context")
    out = s.build(gz, ctx.tag, build_args(base))
    if not out.ok:
        raise _failed_build(ctx, out)
    info = s.inspect(ctx.tag)
    if info is None:
        raise InkctlError(f"the build reported success but {ctx.tag} is not there")
    secs = round(time.monotonic() - t, 3)
    emit("done", s.host, f"image {ctx.tag}", seconds=secs, detail=f"built {info.id[:19]}, sent {out.bytes_sent} bytes")
    return HostImage(s.host, "built", ctx.tag, info.id, out.bytes_sent, secs)


def _local(ctx: BuildContext, gz: bytes, missing: dict[str, HostImages], pins, emit, report: ImageReport,
           done: dict[str, HostImage]) -> None:
    """Build once on the local daemon (unless it has the tag), then stream it to ``missing``."""
    from inkctl.execute.image.deliver import deliver
    from inkctl.execute.image.local_daemon import LocalDaemon

    daemon = LocalDaemon()
    t = time.monotonic()
    info = _cached(ctx, daemon, {})
    action, sent = "cache-hit", 0
    if info is None:
        base = resolve_base(ctx, daemon)
        emit("info", "local", f"building {ctx.tag} on the local daemon")
        out = daemon.build(gz, ctx.tag, build_args(base))
        if not out.ok:
            raise _failed_build(ctx, out)
        info, action, sent = daemon.inspect(ctx.tag), "built", out.bytes_sent
        if info is None:
            raise InkctlError(f"the local daemon built {ctx.tag} but does not list it",
                              hint="run the build again; `docker image ls` shows what the daemon has")
    report.local = HostImage("local", action, ctx.tag, info.id, sent, round(time.monotonic() - t, 3))

    def send(s: HostImages) -> HostImage:
        t = time.monotonic()
        hit = _cached(ctx, s, pins)  # delivered meanwhile by someone else?
        if hit is not None:
            return HostImage(s.host, "cache-hit", ctx.tag, hit.id, 0, round(time.monotonic() - t, 3))
        emit("start", s.host, f"deliver {ctx.tag}")
        d = deliver(daemon, s, ctx.tag, info.id,
                    on_progress=lambda n: emit("info", s.host, f"{n >> 20} MiB of {ctx.tag} sent"))
        emit("done", s.host, f"deliver {ctx.tag}", seconds=round(d.seconds, 3), detail=f"loaded, {d.bytes_sent} bytes sent")
        return HostImage(s.host, "delivered", ctx.tag, d.image_id, d.bytes_sent, round(d.seconds, 3))

    done.update((r.host, r) for r in _parallel(missing, send))


def _probe(ctx: BuildContext, s: HostImages, pins, emit) -> HostImage:
    t = time.monotonic()
    hit = _cached(ctx, s, pins)
    if hit is None:
        return HostImage(s.host, "missing", ctx.tag)
    secs = round(time.monotonic() - t, 3)
    emit("done", s.host, f"image {ctx.tag}", seconds=secs, detail="cache hit, nothing sent")
    return HostImage(s.host, "cache-hit", ctx.tag, hit.id, 0, secs)
