"""Take a deployment down: what ``inkctl down`` does on every host it can reach.

Each host is asked what the deployment has there (by label), and exactly that is removed,
with the deployment's state directory; unreachable hosts are reported, not guessed at.
"""

from __future__ import annotations


def take_down(plan, hosts, *, accept_new: bool = False) -> dict:
    """Probe and remove on every reachable host in parallel; report per host."""
    from concurrent.futures import ThreadPoolExecutor

    from inkctl.execute.connect import close_all, connect_each
    from inkctl.execute.deployed import probe_host
    from inkctl.execute.transport import HostError

    conn = connect_each(list(hosts), accept_new=accept_new)
    removed: dict[str, list[str]] = {}
    failed: dict[str, str] = {n: e.message.split(": ", 1)[-1] for n, e in conn.errors.items()}

    def one(h) -> None:
        tr = conn.transports[h.name]
        try:
            found = probe_host(h.name, tr, h.runtime, plan.deployment)
            names = [f.name for f in found]
            if names:
                argv = (h.runtime, "rm", "--force", *names)
                res = tr.run(argv, timeout=120)
                if not res.ok:
                    failed[h.name] = f"{h.runtime} rm failed with exit code {res.exit_code}: {res.err_text().strip()[-300:]}"
                    return
            res = tr.run(("rm", "-rf", "--", h.state_dir), timeout=60)
            if not res.ok:
                failed[h.name] = f"cannot remove {h.state_dir}: {res.err_text().strip()[-300:]}"
                return
            removed[h.name] = names
        except HostError as e:
            failed[h.name] = e.message.split(": ", 1)[-1]

    todo = [h for h in plan.hosts if h.name in conn.transports]
    lock = None
    try:
        if todo:
            from dataclasses import replace

            from inkctl.execute.deploylock import DeployLock

            lock = DeployLock(replace(plan, hosts=tuple(todo)), conn.transports, "down").acquire()
            with ThreadPoolExecutor(max_workers=min(64, len(todo)), thread_name_prefix="down") as pool:
                list(pool.map(one, todo))
    finally:
        if lock is not None:
            lock.release()
        close_all(conn.transports)
    order = [h.name for h in plan.hosts]
    return {"notices": list(lock.notices) if lock is not None else [],
            "removed": {n: removed[n] for n in order if n in removed},
            "failed": {n: failed[n] for n in order if n in failed}}
