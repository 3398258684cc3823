"""Container engines: per docker host a containerd + dockerd inside its netns; per podman host
the config that points podman at its own storage; and the control dockerd on /var/run/docker.sock.

Each docker host gets its own containerd on purpose: a dockerd left to itself uses the machine's
containerd when /run/containerd/containerd.sock exists (any machine with docker installed), and
then `--network host` containers would land in that containerd's (root) network namespace.
"""

import os
import shutil

from . import gpu, registry
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

def containerd_socket(host):
    return host.path("containerd", "containerd.sock")


def write_containerd_config(host):
    d = host.path("containerd")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "config.toml")
    with open(cfg + ".tmp", "w") as f:
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
    os.replace(cfg + ".tmp", cfg)
    return cfg


DATA_ROOT_SIZE = "8g"  # a cap: tmpfs holds only what is written (about 110 MB for the fake engine image)


def mount_data_root(host, size):
    """The docker data-root is a tmpfs: loading the image is quicker, and `down` frees it at once
    instead of unlinking thousands of files on disk (about 3 s per host here). Small-disk hosts
    get a small one, so a build can fill the disk."""
    os.makedirs(host.data_root, exist_ok=True)
    if not os.path.ismount(host.data_root):
        run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=711", f"inkctl-{host.netns}-disk", host.data_root])


def dockerd_argv(host, containerd_sock):
    return ["dockerd", "--data-root", host.data_root, "--exec-root", host.path("exec"),
            "--pidfile", host.path("docker.pid"), "-H", f"unix://{host.socket}",
            "--containerd", containerd_sock, "--bridge=none", "--iptables=false", "--ip-masq=false",
            "--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", host.cgroup_parent,
            # the cluster's registry (tests/cluster/registry.py) speaks plain HTTP on the bridge
            "--insecure-registry", registry.address(host.net_id)]


def start_docker(host, small_disk_size="400m"):
    """containerd and dockerd in the host's netns (nsenter, not `ip netns exec`: that one
    remounts /sys and dockerd dies with "Devices cgroup isn't mounted")."""
    mount_data_root(host, small_disk_size if host.small_disk else DATA_ROOT_SIZE)
    csock = containerd_socket(host)
    ns = ["nsenter", f"--net={host.netns_path}"]
    env = _env(host.bin_dir)
    if not _answers_grpc(csock, host.path("containerd.pid")):
        cfg = write_containerd_config(host)
        pid = spawn(ns + ["containerd", "--config", cfg, "--root", f"{host.data_root}/containerd",
                          "--state", host.path("containerd", "state"), "--address", csock],
                    host.path("containerd.log"), env=env)
        with open(host.path("containerd.pid"), "w") as f:
            f.write(f"{pid}\n")
    start_dockerd(host)


def start_dockerd(host):
    if docker_ping(host.socket):
        return
    env = _env(host.bin_dir)
    spawn(["nsenter", f"--net={host.netns_path}"] + dockerd_argv(host, containerd_socket(host)),
          host.path("dockerd.log"), env=env)


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
# Outside every cluster's state dir: clusters beside each other (net ids) share it, and the
# `down` of the last one stops it (only if the harness started it) and removes this dir.
CONTROL_DIR = "/var/lib/inkctl-test-control"
CONTROL_PIDFILE = os.path.join(CONTROL_DIR, "docker.pid")


def ensure_control():
    """A dockerd on the default socket for inkctl's local builds, unless one answers there."""
    if docker_ping(CONTROL_SOCKET):
        return
    if not shutil.which("dockerd"):
        raise HarnessError("dockerd: not installed (run tests/cluster/install.sh)")
    bin_dir = os.path.join(CONTROL_DIR, "bin")
    gpu.install(bin_dir, "h200x8")
    open(os.path.join(CONTROL_DIR, ".inkctl-test-cluster"), "w").close()
    argv = ["dockerd", "-H", f"unix://{CONTROL_SOCKET}", "--pidfile", CONTROL_PIDFILE,
            "--data-root", os.path.join(CONTROL_DIR, "data"), "--exec-root", os.path.join(CONTROL_DIR, "exec"),
            "--bridge=none", "--iptables=false", "--ip-masq=false",
            "--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", "/inkctl-test-control"]
    spawn(argv, os.path.join(CONTROL_DIR, "dockerd.log"), env=_env(bin_dir))


def wait_control(timeout=60):
    wait_for("the control dockerd on /var/run/docker.sock", lambda: docker_ping(CONTROL_SOCKET), timeout=timeout,
             on_timeout=lambda: _tail(os.path.join(CONTROL_DIR, "dockerd.log")))


def control_pid():
    """The control dockerd's pid if the harness started it, else None."""
    pid = read_pid(CONTROL_PIDFILE)
    return pid if pid and CONTROL_PIDFILE in cmdline(pid) else None
