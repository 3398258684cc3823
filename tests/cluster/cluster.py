"""The test cluster: up, load, down, and the hooks tests use (exec, docker, ssh, cut/heal,
stop_runtime/start_runtime)."""

import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from . import gpu, image, inventory, net, runtimes, sshd, teardown
from .host import DEFAULT_PROFILES, FALLBACK_PROFILE, Host
from .proc import HarnessError, alive, docker_ping, read_pid, run, tcp_banner

DEFAULT_STATE = "/var/lib/inkctl-test"


def _log(msg):
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


def host_exec(host, argv, check=False, timeout=300, input=None, env=None):
    """Run argv as host: in its netns (and, on a podman host, its mount namespace) with the
    environment an SSH session there gets (DOCKER_HOST or CONTAINERS_CONF, PATH)."""
    if host.runtime == "podman":
        pid = read_pid(host.sshd_pid_file)
        if not alive(pid):
            raise HarnessError(f"{host.name}: sshd is not running, and with it went the host's mount namespace")
        ns = ["nsenter", "-t", str(pid), "--net", "--mount"]
    else:
        ns = ["nsenter", f"--net={host.netns_path}"]
    full_env = dict(os.environ, **host.session_env, **(env or {}))
    return run(ns + ["--", *argv], check=check, timeout=timeout, input=input, env=full_env)


class Cluster:
    """A running test cluster. ``Cluster.up(4)`` makes one; ``Cluster.load(state)`` finds it again."""

    def __init__(self, state, hosts, record):
        self.state, self.hosts, self.record = state, hosts, record

    # ------------------------------------------------------------ files clients read
    @property
    def inventory(self):
        return os.path.join(self.state, "inventory.yaml")

    @property
    def known_hosts(self):
        return os.path.join(self.state, "known_hosts")

    @property
    def ssh_config(self):
        return os.path.join(self.state, "ssh_config")

    @property
    def identity_file(self):
        return os.path.join(self.state, "client", "id_ed25519")

    @property
    def image_id(self):
        return self.record.get("image_id")

    def host(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no test host {name!r}; hosts are {', '.join(h.name for h in self.hosts)}")

    # ------------------------------------------------------------ up / load / down
    @classmethod
    def up(cls, n_hosts, podman_hosts=("h3",), small_disk_hosts=(), state=DEFAULT_STATE, profiles=None,
           fresh=False, small_disk_size="400m", net_id=0, log=_log):
        """Bring up n_hosts hosts h1..hN (idempotent: a healthy cluster with the same shape is
        reused unless fresh=True; anything else, including leftovers of a crashed run, is torn
        down first). podman_hosts beyond n_hosts are ignored. net_id K > 0 makes a second,
        independent cluster beside the default one (netns ink<K>h<i>, 10.231.K.0/24, state
        /var/lib/inkctl-test-<K> unless given)."""
        t0 = time.monotonic()
        state = default_state(net_id) if state == DEFAULT_STATE else os.path.abspath(state)
        names = [f"h{i}" for i in range(1, n_hosts + 1)]
        if not 1 <= n_hosts <= 200:
            raise ValueError("n_hosts must be between 1 and 200")
        for what, given in (("small_disk_hosts", small_disk_hosts), ("profiles", profiles or {})):
            bad = [n for n in given if n not in names]
            if bad:
                raise ValueError(f"{what}: no such host(s) {bad}; hosts are h1..h{n_hosts}")
        known = gpu.profiles()
        profiles = {n: (profiles or {}).get(n) or DEFAULT_PROFILES.get(n, FALLBACK_PROFILE) for n in names}
        for n, p in profiles.items():
            if p not in known:
                raise ValueError(f"{n}: unknown nvidia-smi profile {p!r}; known: {', '.join(known)}")
        hosts = [Host(n, i, "podman" if n in podman_hosts else "docker", profiles[n], n in small_disk_hosts, state,
                      net_id) for i, n in enumerate(names, 1)]
        config = {"hosts": [h.to_json() for h in hosts], "small_disk_size": small_disk_size,
                  "image_key": image.image_key()}

        if not fresh:
            old = cls._try_load(state)
            if old and old.record.get("config") == config and old.record.get("ready"):
                problems = old.problems()
                if not problems:
                    log(f"reusing the running cluster in {state} ({time.monotonic() - t0:.1f} s)")
                    return old
                log("rebuilding the cluster: " + "; ".join(problems[:3]))
        teardown.teardown(state, net_id, final=False, log=log)
        t_clean = time.monotonic()

        os.makedirs(state, mode=0o755, exist_ok=True)
        open(os.path.join(state, teardown.MARKER), "w").close()
        with open(teardown.active_file(net_id), "w") as f:
            f.write(state + "\n")
        record = {"config": config, "ready": False}
        cluster = cls(state, hosts, record)
        cluster._save()

        with ThreadPoolExecutor(max_workers=len(hosts) + 4) as pool:
            img = pool.submit(image.archive, log)
            control = pool.submit(cls._control)
            net.ensure_bridge(net_id)
            record["forward_rule"] = net.allow_bridge_forwarding(net_id)
            if not os.path.ismount(net.NETNS_DIR):
                teardown.note_created("netns_mount")
            if not os.path.isdir("/run/sshd"):
                os.makedirs("/run/sshd", mode=0o755)
                teardown.note_created("run_sshd")
            for h in hosts:
                net.add_netns(h.index, net_id)
            identity = sshd.client_key(state)
            if any(h.runtime == "podman" for h in hosts):
                record["cdi_spec"] = gpu.install_cdi_spec()
            cluster._save()
            _wait_all([(h.name, pool.submit(cls._start_host, h, small_disk_size)) for h in hosts])
            t_hosts = time.monotonic()
            path, image_id = img.result()
            control.result()
            record["image_id"], record["image_archive"] = image_id, path
            t_image = time.monotonic()
            loads = [(h.name, pool.submit(cluster._load_image, h, path, image_id)) for h in hosts]
            loads.append(("control", pool.submit(image.load_docker, runtimes.CONTROL_SOCKET, path, image_id)))
            _wait_all(loads)
        inventory.write(state, hosts, identity)
        record["ready"] = True
        cluster._save()
        t1 = time.monotonic()
        log(f"{len(hosts)} hosts up in {t1 - t0:.1f} s (cleanup {t_clean - t0:.1f}, hosts {t_hosts - t_clean:.1f}, "
            f"image wait {t_image - t_hosts:.1f}, image load {t1 - t_image:.1f}); inventory: {cluster.inventory}")
        return cluster

    @classmethod
    def load(cls, state=DEFAULT_STATE):
        c = cls._try_load(os.path.abspath(state))
        if c is None:
            raise HarnessError(f"no test cluster in {state}: run `python -m tests.cluster up --hosts N`")
        return c

    @classmethod
    def _try_load(cls, state):
        record = teardown.read_record(state)
        if not record.get("config"):
            return None
        return cls(state, [Host.from_json(d, state) for d in record["config"]["hosts"]], record)

    @property
    def net_id(self):
        return self.hosts[0].net_id if self.hosts else 0

    def down(self, log=_log):
        down(self.state, self.net_id, log)

    def _save(self):
        tmp = os.path.join(self.state, "cluster.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.record, f, indent=1)
        os.replace(tmp, os.path.join(self.state, "cluster.json"))

    @staticmethod
    def _control():
        runtimes.ensure_control()
        runtimes.wait_control()

    def fabric(self, name, tree=None):
        """The host's RDMA fabric as its probe reads it: ``tree`` (a tests.sysfs_trees.HostTree)
        written under its INKCTL_SYSFS_ROOT, or None: no RDMA device."""
        from pathlib import Path

        from tests import sysfs_trees

        h = self.host(name)
        old = Path(h.sys_dir, "class", "net")
        for n in sorted(p.name for p in old.iterdir()) if old.is_dir() else ():
            self.exec(name, ["ip", "link", "del", n])  # the netdevs of the tree before
        shutil.rmtree(h.sys_dir, ignore_errors=True)
        os.makedirs(h.sys_dir)
        if tree is None:
            return
        sysfs_trees.write(Path(h.sys_dir), tree)
        for r in tree.rails:  # each rail's netdev exists in the host's namespace, as on the host: a veth
            peer = r.netdev[:13] + "-p"  # (pair: no dummy module here) whose peer stays in the namespace too
            self.exec(name, ["ip", "link", "add", r.netdev, "mtu", str(r.mtu), "type", "veth", "peer", "name", peer],
                      check=True)
            if r.state.endswith("ACTIVE"):
                for n in (peer, r.netdev):
                    self.exec(name, ["ip", "link", "set", n, "up"], check=True)

    @staticmethod
    def _start_host(h, small_disk_size):
        for d in (h.dir, h.state_dir, h.hf_dir, h.sys_dir):
            os.makedirs(d, exist_ok=True)
        gpu.install(h.bin_dir, h.profile)
        net.wire_host(h.index, h.net_id)
        if h.runtime == "docker":
            runtimes.start_docker(h, small_disk_size)
        else:
            runtimes.podman_config(h)
        sshd.start(h)
        if h.runtime == "docker":
            runtimes.wait_docker(h)
        else:
            host_exec(h, ["podman", "info", "--format", "{{.Store.GraphRoot}}"], check=True)

    def _load_image(self, h, path, image_id):
        if h.runtime == "docker":
            return image.load_docker(h.socket, path, image_id)
        return image.load_podman(lambda argv: host_exec(h, argv, timeout=600), path, image_id)

    # ------------------------------------------------------------ health
    def problems(self):
        """What is wrong with the cluster, as sentences; empty when all is well."""
        out = []
        for h in self.hosts:
            if not os.path.exists(h.netns_path):
                out.append(f"{h.name}: netns {h.netns} is missing")
                continue
            if not net.link_is_up(h.index, h.net_id):
                out.append(f"{h.name}: link {h.veth} is down (cut)")
            elif not tcp_banner(h.address, 22).startswith(b"SSH-"):
                out.append(f"{h.name}: sshd does not answer on {h.address}:22")
            if h.runtime == "docker":
                if not docker_ping(h.socket):
                    out.append(f"{h.name}: dockerd does not answer on {h.socket}")
                elif self.image_id and not image.docker_has(h.socket, self.image_id):
                    out.append(f"{h.name}: {image.IMAGE} is missing")
            elif not alive(read_pid(h.sshd_pid_file)):
                out.append(f"{h.name}: sshd (holding podman's mount namespace) is not running")
            elif os.path.exists(os.path.join(h.bin_dir, "podman")):
                out.append(f"{h.name}: podman is stopped (stop_runtime)")
        if not docker_ping(runtimes.CONTROL_SOCKET):
            out.append("the control dockerd does not answer on /var/run/docker.sock")
        return out

    # ------------------------------------------------------------ hooks for tests
    def exec(self, name, argv, check=False, timeout=300, input=None, env=None):
        """Run argv on host `name` (its netns, DOCKER_HOST/CONTAINERS_CONF and PATH) -> CompletedProcess."""
        return host_exec(self.host(name), list(argv), check=check, timeout=timeout, input=input, env=env)

    def docker(self, name, *args, check=False, timeout=300):
        """`docker ARGS` on a docker host, `podman ARGS` on a podman host."""
        h = self.host(name)
        return host_exec(h, [h.runtime, *args], check=check, timeout=timeout)

    def tag_image(self, ref, names=None, control=True):
        """Give the fake engine image another name (e.g. the image a recipe asks for) on the hosts
        `names` (default all) and the control dockerd. For a fresh copy: ``docker load -i
        cluster.record["image_archive"]``."""
        for n in names or [h.name for h in self.hosts]:
            self.docker(n, "tag", image.IMAGE, ref, check=True)
        if control:
            run(["docker", "-H", f"unix://{runtimes.CONTROL_SOCKET}", "tag", image.IMAGE, ref])

    def ssh_argv(self, name):
        return ["ssh", "-F", self.ssh_config, name]

    def ssh(self, name, command, check=False, timeout=60):
        """Run a shell command on host `name` over real SSH (StrictHostKeyChecking=yes)."""
        return run(self.ssh_argv(name) + ["--", command], check=check, timeout=timeout)

    def limit_links(self, mbit):
        """Every host's link capped at ``mbit`` Mbit/s each way (None: no cap)."""
        for h in self.hosts:
            net.limit_link(h.index, mbit, h.net_id)

    def cut(self, name):
        """Take the host off the network (its veth goes down)."""
        h = self.host(name)
        net.set_link(h.index, False, h.net_id)

    def heal(self, name):
        h = self.host(name)
        net.set_link(h.index, True, h.net_id)

    def stop_runtime(self, name):
        """Stop the host's container engine: dockerd is killed (its containers stop with it; its
        containerd stays); podman, daemonless, is replaced on the session PATH by a failing stub."""
        h = self.host(name)
        if h.runtime == "docker":
            runtimes.stop_dockerd(h)
        else:
            stub = os.path.join(h.bin_dir, "podman")
            with open(stub, "w") as f:
                f.write(f"#!/bin/sh\necho 'Error: podman on test host {h.name} is stopped "
                        "(tests/cluster stop_runtime)' >&2\nexit 125\n")
            os.chmod(stub, 0o755)

    def start_runtime(self, name):
        h = self.host(name)
        if h.runtime == "docker":
            runtimes.start_dockerd(h)
            runtimes.wait_docker(h)
        else:
            stub = os.path.join(h.bin_dir, "podman")
            if os.path.exists(stub):
                os.remove(stub)

    def __repr__(self):
        return f"Cluster({self.state!r}, hosts={[h.name for h in self.hosts]})"


def default_state(net_id=0):
    return DEFAULT_STATE if not net_id else f"{DEFAULT_STATE}-{net_id}"


def down(state=DEFAULT_STATE, net_id=None, log=_log):
    """Remove everything `up` made (also after a crashed or half-finished up). The net id comes
    from the state dir's record; give it when that record is gone (default 0)."""
    t0 = time.monotonic()
    if state == DEFAULT_STATE and net_id:
        state = default_state(net_id)
    state = os.path.abspath(state)
    if net_id is None:
        hosts = teardown.read_record(state).get("config", {}).get("hosts") or [{}]
        net_id = hosts[0].get("net_id", 0)
    teardown.teardown(state, net_id, final=True, log=log)
    log(f"down in {time.monotonic() - t0:.1f} s")


def _wait_all(named_futures):
    errors = []
    for name, fut in named_futures:
        try:
            fut.result()
        except Exception as e:  # noqa: BLE001 - report every host's failure, not just the first
            errors.append(f"{name}: {e}")
    if errors:
        raise HarnessError("cluster up failed (inspect logs under the state dir; "
                           "`python -m tests.cluster down` cleans up):\n  " + "\n  ".join(errors))


__all__ = ["Cluster", "DEFAULT_STATE", "default_state", "down", "host_exec"]
