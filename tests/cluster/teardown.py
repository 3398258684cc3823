"""Remove everything the harness made, found by looking rather than by trusting records, so it
also works after a crashed run: processes in our netns or rooted/working under the state dir,
mounts under the state dir, netns inkh*, links inkv* and inkbr0, the iptables rule, the CDI spec,
cgroups, stale containerd shim sockets, the control dockerd if we started it, the state dir."""

import glob
import json
import os
import shutil
import socket

from . import gpu, net
from .proc import cmdline, kill_all, run

MARKER = ".inkctl-test-cluster"
ACTIVE = "/run/inkctl-test.state"  # the state dir of the cluster that is up (for a later up/down with another)


def state_dirs(state):
    dirs = [os.path.abspath(state)]
    try:
        with open(ACTIVE) as f:
            other = f.read().strip()
        if other and other not in dirs:
            dirs.append(other)
    except OSError:
        pass
    return dirs


def _under(path, roots):
    return any(path == r or path.startswith(r + "/") for r in roots)


DAEMONS = ("sshd", "dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "conmon", "runc", "podman")


def _pids_under(roots, spare):
    """Processes rooted under one of roots (containers), and our daemons (by name) whose working
    dir or command line points there (shims, conmon, sshd, dockerd, containerd)."""
    found = set()
    me = {os.getpid(), os.getppid()}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in me:
            continue
        try:
            targets = [os.readlink(f"/proc/{d}/root")]
        except OSError:
            continue
        line = cmdline(d)
        argv0 = os.path.basename(line.split(" ", 1)[0].rstrip(":"))
        if argv0.startswith(DAEMONS):
            try:
                targets.append(os.readlink(f"/proc/{d}/cwd"))
            except OSError:
                pass
            targets += [w.split("=", 1)[-1] for w in line.split()]
        if any(_under(t, roots) and not _under(t, spare) for t in targets):
            found.add(int(d))
    return found


def _netns_pids():
    pids = set()
    for name in net.our_netns():
        pids.update(net.netns_pids(name))
    return pids


def kill_processes(roots, keep_control):
    spare = [os.path.join(r, "control") for r in roots] if keep_control else []
    for _ in range(5):
        pids = _netns_pids() | _pids_under(roots, spare)
        pids.discard(os.getpid())
        if not pids:
            return
        kill_all(pids, timeout=6)


def unmount_under(roots, spare=()):
    for _ in range(3):
        with open("/proc/self/mountinfo") as f:
            points = [ln.split()[4].encode().decode("unicode_escape") for ln in f]
        points = sorted({p for p in points if any(p.startswith(r + "/") for r in roots) and not _under(p, spare)}, key=len, reverse=True)
        if not points:
            return
        for p in points:
            if run(["umount", p], check=False).returncode != 0:
                run(["umount", "-l", p], check=False)


def remove_cgroups():
    for top in glob.glob("/sys/fs/cgroup/*/inkctl-test-*") + glob.glob("/sys/fs/cgroup/inkctl-test-*"):
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def remove_podman_cgroups(container_ids):
    for cid in container_ids:
        for d in glob.glob(f"/sys/fs/cgroup/*/libpod_parent/*{cid}*") + glob.glob(f"/sys/fs/cgroup/*/libpod_parent/*/*{cid}*"):
            try:
                os.rmdir(d)
            except OSError:
                pass


def podman_container_ids(roots):
    ids = []
    for r in roots:
        ids += [os.path.basename(p) for p in glob.glob(os.path.join(r, "h*", "podman", "storage", "overlay-containers", "*"))
                if len(os.path.basename(p)) == 64]
    return ids


def remove_stale_shim_sockets():
    """containerd 1.6 shims put their sockets in /run/containerd/s whatever containerd's
    address; a killed shim leaves its socket. Remove the ones nobody listens on."""
    d = "/run/containerd/s"
    for p in glob.glob(os.path.join(d, "*")):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(p)
        except ConnectionRefusedError:
            os.remove(p)
        except OSError:
            pass
        finally:
            s.close()
    for p in (d, "/run/containerd"):
        try:
            os.rmdir(p)
        except OSError:
            break


def read_record(root):
    try:
        with open(os.path.join(root, "cluster.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def teardown(state, keep_control=False, log=print):
    roots = state_dirs(state)
    records = [read_record(r) for r in roots]
    cids = podman_container_ids(roots)
    kill_processes(roots, keep_control)
    unmount_under(roots, [os.path.join(r, "control") for r in roots] if keep_control else ())
    for name in net.our_netns():
        net.delete_netns(name)
    net.delete_links()
    net.remove_bridge_forwarding()
    gpu.remove_cdi_spec()
    remove_cgroups()
    remove_podman_cgroups(cids)
    remove_stale_shim_sockets()
    if any(r.get("created_netns_mount") for r in records) and not net.our_netns():
        _drop_netns_mount()
    for r in roots:
        _remove_state(r, keep_control)
    if not keep_control:
        try:
            os.remove(ACTIVE)
        except OSError:
            pass


def _drop_netns_mount():
    try:
        if os.listdir(net.NETNS_DIR):
            return
    except OSError:
        return
    run(["umount", net.NETNS_DIR], check=False)
    run(["umount", net.NETNS_DIR], check=False)  # iproute2 mounts it twice (bind, then make-shared)
    try:
        os.rmdir(net.NETNS_DIR)
    except OSError:
        pass


def _remove_state(root, keep_control):
    """rm -rf the state dir, but only one the harness made (it holds the marker)."""
    if not os.path.isdir(root):
        return
    if not os.path.exists(os.path.join(root, MARKER)) and os.listdir(root):
        print(f"not removing {root}: it lacks {MARKER}, so the harness did not make it")
        return
    for entry in os.listdir(root):
        if keep_control and entry in ("control", MARKER):
            continue
        p = os.path.join(root, entry)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            os.remove(p)
    if not keep_control:
        shutil.rmtree(root, ignore_errors=True)
