"""One simulated host: its name, address, runtime and where its files live under the state dir."""

import os
from dataclasses import dataclass

from . import net

STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_PROFILES = {"h1": "gb10", "h2": "gb10", "h3": "h200x8", "h4": "rtxpro6000x2"}
FALLBACK_PROFILE = "h200x8"


@dataclass(frozen=True)
class Host:
    name: str          # h1..hN
    index: int         # N
    runtime: str       # "docker" | "podman"
    profile: str       # nvidia-smi fixture profile
    small_disk: bool   # docker data-root on a small tmpfs
    root: str          # the cluster's state dir
    net_id: int = 0    # 0: the default network (inkbr0, 10.231.0.0/24); K: a second cluster beside it

    @property
    def address(self):
        return net.address(self.index, self.net_id)

    @property
    def netns(self):
        return net.netns(self.index, self.net_id)

    @property
    def netns_path(self):
        return net.netns_path(self.index, self.net_id)

    @property
    def veth(self):
        return net.veth(self.index, self.net_id)

    @property
    def cgroup_parent(self):
        return f"/inkctl-test-{self.netns}"

    @property
    def dir(self):
        return os.path.join(self.root, self.name)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    @property
    def bin_dir(self):
        return self.path("bin")

    @property
    def sys_dir(self):
        return self.path("sys")

    @property
    def state_dir(self):
        """inkctl's remote state dir on this host (all hosts share one filesystem)."""
        return self.path("state")

    @property
    def hf_dir(self):
        return self.path("hf")

    @property
    def socket(self):
        """The docker socket (None on a podman host)."""
        return self.path("docker.sock") if self.runtime == "docker" else None

    @property
    def data_root(self):
        return self.path("docker")

    @property
    def sshd_pid_file(self):
        return self.path("sshd.pid")

    @property
    def session_env(self):
        """What an SSH session on this host gets (sshd SetEnv) and what exec() runs with."""
        # SHLVL=1: bash sources ~/.bashrc only when it starts at level 0, so a remote command
        # skips root's rc files (pyenv init here), as on real hosts; their cost and their locks
        # would otherwise land in every command of every simulated host
        env = {"PATH": f"{self.bin_dir}:{STD_PATH}", "INKCTL_TEST_HOST": self.name, "SHLVL": "1",
               # the RDMA fabric inkctl's probe reads: a sysfs tree of this host's own (empty: no
               # RDMA device; Cluster.fabric writes one)
               "INKCTL_SYSFS_ROOT": self.sys_dir}
        if self.runtime == "docker":
            env["DOCKER_HOST"] = f"unix://{self.socket}"
        else:
            env["CONTAINERS_CONF"] = self.path("containers.conf")
            env["CONTAINERS_STORAGE_CONF"] = self.path("storage.conf")
        return env

    def to_json(self):
        return {"name": self.name, "index": self.index, "runtime": self.runtime, "profile": self.profile,
                "small_disk": self.small_disk, "net_id": self.net_id, "address": self.address, "socket": self.socket,
                "netns": self.netns, "dir": self.dir, "state_dir": self.state_dir, "hf_dir": self.hf_dir}

    @classmethod
    def from_json(cls, d, root):
        return cls(d["name"], d["index"], d["runtime"], d["profile"], d["small_disk"], root, d.get("net_id", 0))
