"""Container engines: per docker host a containerd + dockerd inside its netns; per podman host
the config that points podman at its own storage; and the control dockerd on /var/run/docker.sock.

Each docker host gets its own containerd on purpose: a dockerd left to itself uses the machine's
containerd when /run/containerd/containerd.sock exists (any machine with docker installed), and
then `--network host` containers would land in that containerd's (root) network namespace.
"""

import os
import shutil

from . import gpu
from .host import STD_PATH
from .proc import HarnessError, cmdline, docker_ping, kill_all, read_pid, run, spawn, wait_for

CONTROL_SOCKET = "/var/run/docker.sock"


def _env(bin_dir):
    return dict(os.environ, PATH=f"{bin_dir}:{STD_PATH}")


def _tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------- docker hosts

def containerd_config(host):
    d = host.path("containerd")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "config.toml")
    with open(cfg, "w") as f:
        f.write(f"""version = 2
root = "{host.data_root}/containerd"
state = "{d}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
oom_score = 0
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
""")
    return cfg, f"{d}/containerd.sock"


def mount_small_disk(host, size):
    """A small tmpfs as the docker data-root, so a build can fill the disk."""
    os.makedirs(host.data_root, exist_ok=True)
    if not os.path.ismount(host.data_root):
        run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=711", f"inkctl-{host.name}-disk", host.data_root])


def dockerd_argv(host, containerd_sock):
    return ["dockerd", "--data-root", host.data_root, "--exec-root", host.path("exec"),
            "--pidfile", host.path("docker.pid"), "-H", f"unix://{host.socket}",
            "--containerd", containerd_sock, "--bridge=none", "--iptables=false", "--ip-masq=false",
            "--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", f"/inkctl-test-{host.name}"]


def start_docker(host, small_disk_size="400m"):
    """containerd and dockerd in the host's netns (nsenter, not `ip netns exec`: that one
    remounts /sys and dockerd dies with "Devices cgroup isn't mounted")."""
    if host.small_disk:
        mount_small_disk(host, small_disk_size)
    cfg, csock = containerd_config(host)
    ns = ["nsenter", f"--net={host.netns_path}"]
    env = _env(host.bin_dir)
    if not _answers_grpc(csock, host.path("containerd.pid")):
        pid = spawn(ns + ["containerd", "--config", cfg], host.path("containerd.log"), env=env)
        with open(host.path("containerd.pid"), "w") as f:
            f.write(f"{pid}\n")
    start_dockerd(host)


def start_dockerd(host):
    if docker_ping(host.socket):
        return
    _, csock = containerd_config(host)
    env = _env(host.bin_dir)
    spawn(["nsenter", f"--net={host.netns_path}"] + dockerd_argv(host, csock), host.path("dockerd.log"), env=env)


def wait_docker(host, timeout=60):
    log = host.path("dockerd.log")
    wait_for(f"dockerd of {host.name}", lambda: docker_ping(host.socket), timeout=timeout,
             on_timeout=lambda: _tail(log) + _tail(host.path("containerd.log")))


def stop_dockerd(host):
    pid = read_pid(host.path("docker.pid"))
    if pid and host.socket in cmdline(pid):
        kill_all([pid], timeout=30)


def _answers_grpc(sock, pidfile):
    pid = read_pid(pidfile)
    return bool(pid) and os.path.exists(sock) and "containerd" in cmdline(pid)


# ---------------------------------------------------------------- podman hosts

def podman_config(host):
    """containers.conf (no default ulimits, runc, cgroupfs: what works on this kind of machine)
    and storage.conf (the host's own storage), handed to sessions by CONTAINERS_CONF/..._STORAGE_CONF."""
    p = host.path("podman")
    for d in ("storage", "tmp"):
        os.makedirs(os.path.join(p, d), exist_ok=True)
    with open(host.path("containers.conf"), "w") as f:
        f.write(f"""# podman on test host {host.name} (written by tests/cluster)
[containers]
default_ulimits = []
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{p}/events.log"
image_copy_tmp_dir = "{p}/tmp"
static_dir = "{p}/storage/libpod"
volume_path = "{p}/storage/volumes"
""")
    with open(host.path("storage.conf"), "w") as f:
        f.write(f"""# podman storage of test host {host.name} (written by tests/cluster)
[storage]
driver = "overlay"
graphroot = "{p}/storage"
runroot = "/run/inkctl-podman"
""")


# ---------------------------------------------------------------- the control dockerd

def ensure_control(root):
    """A dockerd on the default socket for inkctl's local builds, unless one answers there.
    Returns True when the harness started it (and so `down` stops it)."""
    d = os.path.join(root, "control")
    pidfile = os.path.join(d, "docker.pid")
    if docker_ping(CONTROL_SOCKET):
        pid = read_pid(pidfile)
        return bool(pid) and pidfile in cmdline(pid)
    if not shutil.which("dockerd"):
        raise HarnessError("dockerd: not installed (run tests/cluster/install.sh)")
    bin_dir = os.path.join(d, "bin")
    gpu.install(bin_dir, "h200x8")
    argv = ["dockerd", "-H", f"unix://{CONTROL_SOCKET}", "--pidfile", pidfile,
            "--data-root", os.path.join(d, "data"), "--exec-root", os.path.join(d, "exec"),
            "--bridge=none", "--iptables=false", "--ip-masq=false",
            "--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", "/inkctl-test-control"]
    spawn(argv, os.path.join(d, "dockerd.log"), env=_env(bin_dir))
    return True


def wait_control(root, timeout=60):
    log = os.path.join(root, "control", "dockerd.log")
    wait_for("the control dockerd on /var/run/docker.sock", lambda: docker_ping(CONTROL_SOCKET), timeout=timeout,
             on_timeout=lambda: _tail(log))


def control_pid(root):
    pidfile = os.path.join(root, "control", "docker.pid")
    pid = read_pid(pidfile)
    return pid if pid and pidfile in cmdline(pid) else None


def docker_cli():
    return shutil.which("docker") or "docker"
