"""Remove everything the harness made, found by looking rather than by trusting records, so it
also works after a crashed run: processes in our netns or rooted/working under the state dir,
mounts under the state dir, Slurm (and its /etc/hosts lines), netns inkh*, links inkv* and inkbr0, the iptables rule, the CDI spec,
cgroups, stale containerd shim sockets, the control dockerd if we started it, the state dir."""

import glob
import json
import os
import shutil
import socket

from . import gpu, net
from .proc import cmdline, kill_all, read_pid, run

MARKER = ".inkctl-test-cluster"
SHARED = "/run/inkctl-test.shared.json"  # machine-wide things the harness created (for the last down)


def note_created(what):
    """Remember that the harness created a machine-wide thing ("netns_mount", "run_sshd")."""
    try:
        with open(SHARED) as f:
            made = json.load(f)
    except (OSError, ValueError):
        made = {}
    if not made.get(what):
        made[what] = True
        with open(SHARED + ".tmp", "w") as f:
            json.dump(made, f)
        os.replace(SHARED + ".tmp", SHARED)


def active_file(net_id=0):
    """Names the state dir of the cluster that is up on this network (for an up/down with another)."""
    return "/run/inkctl-test.state" if net_id == 0 else f"/run/inkctl-test-{net_id}.state"


def state_dirs(state, net_id=0):
    dirs = [os.path.abspath(state)]
    try:
        with open(active_file(net_id)) as f:
            other = f.read().strip()
        if other and other not in dirs:
            dirs.append(other)
    except OSError:
        pass
    return dirs


def _under(path, roots):
    return any(path == r or path.startswith(r + "/") for r in roots)


DAEMONS = ("sshd", "dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "conmon", "runc", "podman",
           "docker-registry", "munged", "slurmctld", "slurmd", "slurmstepd")


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


def _netns_pids(net_id):
    pids = set()
    for name in net.our_netns(net_id):
        pids.update(net.netns_pids(name))
    return pids


def kill_processes(roots, net_id=None, spare=()):
    for _ in range(5):
        pids = (_netns_pids(net_id) if net_id is not None else set()) | _pids_under(roots, spare)
        pids.discard(os.getpid())
        if not pids:
            return
        kill_all(pids, timeout=6, graceful=False)  # all of it is about to be deleted


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


def remove_cgroups(pattern):
    for top in glob.glob(f"/sys/fs/cgroup/*/{pattern}") + glob.glob(f"/sys/fs/cgroup/{pattern}"):
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
    """Podman's storage is a tmpfs inside a podman host's mount namespace: look through the
    sshd holding it (/proc/PID/root) to learn its container ids, whose cgroups podman leaves."""
    ids = set()
    for r in roots:
        for storage in glob.glob(os.path.join(r, "h*", "podman", "storage")):
            pid = read_pid(os.path.join(os.path.dirname(os.path.dirname(storage)), "sshd.pid"))
            views = [storage] + ([f"/proc/{pid}/root{storage}"] if pid else [])
            for v in views:
                ids.update(os.path.basename(p) for p in glob.glob(os.path.join(v, "overlay-containers", "*"))
                           if len(os.path.basename(p)) == 64)
    return sorted(ids)


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


def teardown(state, net_id=0, final=True, log=print):
    """Remove the cluster of this state dir and net id (and the one the active file names).
    final (a `down`, not the clean-up before an `up`): when no cluster is left, also remove what
    clusters share: the control dockerd if the harness started it, the CDI spec, /run/netns."""
    roots = state_dirs(state, net_id)
    from . import slurm

    for r in roots:
        slurm.stop(r, net_id)  # its daemons, and exactly its /etc/hosts lines
    cids = podman_container_ids(roots)
    kill_processes(roots, net_id)
    unmount_under(roots)
    for name in net.our_netns(net_id):
        net.delete_netns(name)
    net.delete_links(net_id)
    net.remove_bridge_forwarding(net_id)
    remove_cgroups(f"inkctl-test-{net.netns('*', net_id)}")
    if net_id == 0:
        remove_cgroups("inkctl-test-h[0-9]*")  # the layout before net ids
    remove_podman_cgroups(cids)
    remove_stale_shim_sockets()
    for r in roots:
        _remove_state(r)
    try:
        os.remove(active_file(net_id))
    except OSError:
        pass
    if final and not net.any_cluster_netns():
        gpu.remove_cdi_spec()
        stop_control()
        _remove_shared()


def _remove_shared():
    try:
        with open(SHARED) as f:
            made = json.load(f)
    except (OSError, ValueError):
        return
    if made.get("netns_mount"):
        _drop_netns_mount()
    if made.get("run_sshd") and not any(os.path.basename(cmdline(p).split(" ", 1)[0]).startswith("sshd")
                                        for p in os.listdir("/proc") if p.isdigit()):
        shutil.rmtree("/run/sshd", ignore_errors=True)
    os.remove(SHARED)


def stop_control():
    """Stop the control dockerd (with its containerd and containers) if the harness started it:
    only processes pointing into its dir are touched, so a machine's own dockerd is left alone."""
    from .runtimes import CONTROL_DIR
    if not os.path.isdir(CONTROL_DIR):
        return
    kill_processes([CONTROL_DIR])
    unmount_under([CONTROL_DIR])
    remove_cgroups("inkctl-test-control")
    remove_stale_shim_sockets()
    _remove_state(CONTROL_DIR)


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


def _remove_state(root):
    """rm -rf the state dir, but only one the harness made (it holds the marker)."""
    if not os.path.isdir(root):
        return
    if not os.path.exists(os.path.join(root, MARKER)) and os.listdir(root):
        print(f"not removing {root}: it lacks {MARKER}, so the harness did not make it")
        return
    shutil.rmtree(root, ignore_errors=True)
