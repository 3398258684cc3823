"""What a benchmark ran against, recorded beside its numbers: recipe hash, image and its digest,
engine arguments, and every host's GPUs and driver (read from the hosts, not the recipe)."""

from __future__ import annotations


def deployment_provenance(loaded, plan, *, accept_new: bool = False) -> dict:
    r = loaded.recipe
    image = r.engine.image
    prov: dict = {
        "deployment": plan.deployment,
        "recipe_hash": plan.recipe_hash,
        "engine": r.engine.kind,
        "engine_args": r.engine.args.model_dump(mode="json", exclude_none=True),
        "image": {"ref": image.model_dump(mode="json", exclude_none=True), "digest": None},
        "hosts": {},
    }
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.hosts.fanout import each
    from inkctl import runtimes

    conn = connect_each(list(loaded.hosts), accept_new=accept_new)
    for name, err in conn.errors.items():
        prov["hosts"][name] = {"error": str(err)}
    head = next((c for c in plan.containers if c.rank == 0), None)

    def one(h):
        tr = conn.transports[h.name]
        info: dict = {}
        from inkctl.execute.state.gpu import QUERY, GpuProbeError, parse_query_gpu

        res = tr.run(QUERY, timeout=30)
        try:
            gpus = parse_query_gpu(res.text()) if res.ok else []
            info["gpus"] = [g.as_dict() for g in gpus]
            info["driver"] = gpus[0].driver if gpus else None
            if not res.ok:
                info["gpu_error"] = (res.err_text() or res.text()).strip()[-200:]
        except GpuProbeError as e:
            info["gpu_error"] = e.message
        if head is not None and head.host == h.name:
            res = tr.run(runtimes.get(h.runtime).inspect(head.name, format="{{.Image}}"), timeout=30)
            if res.ok:
                prov["image"]["digest"] = res.text().strip() or None
        return h.name, info

    try:
        for name, info in each(one, [h for h in plan.hosts if h.name in conn.transports], name="provenance"):
            prov["hosts"][name] = info
    finally:
        close_all(dict(conn.transports))
    return prov
