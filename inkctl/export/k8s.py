"""recipe -> Kubernetes manifests (a LeaderWorkerSet, its Service, the hotfix ConfigMap). Pure.

The manifests come from the very plan ``up`` runs: ``build_plan`` on stand-in hosts whose
addresses are rendezvous tokens, then each rank's Run step's ``ContainerSpec`` read by ``k8s_pod.from_spec``.
Rank 0 becomes the leader template, rank 1 the worker template (every other rank differs from it
only by ``$(LWS_WORKER_INDEX)``). ``--node-rank``/``--nnodes`` values are checked against the
plan's rank and size before they become ``$(LWS_WORKER_INDEX)``/``$(LWS_GROUP_SIZE)``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from inkctl.errors import InkctlError
from inkctl.export.k8s_pod import (DOWNWARD, GROUP_SIZE, LEADER, POD_IP, POD_NAME, RANK, Gap, RunArgs, from_spec,
                                   k8s_text, quantity, shown, unresolved_vars, used_vars, var_token)
from inkctl.plan.deploy import build_plan
from inkctl.plan.stages.launch import SERVE_IN_HEAD
from inkctl.plan.hotfix import MOUNT
from inkctl.plan.stages.launch import ENGINE_FILES
from inkctl.plan.quote import command_line
from inkctl.plan.step import EnvFile, Plan, Put, Run, SecretRef, Smoke, WaitFor, WaitHealth
from inkctl.recipe.fields import referenced_vars
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
ROLE_LABEL = "inkctl.role"
ENGINE = "engine"
HF_CACHE_DEFAULT = "/root/.cache/huggingface"
DEFAULT_DEVICE_RESOURCES = (("/dev/infiniband", "rdma/rdma_shared_device_a"),)
CONFIGMAP_MAX = 1024 * 1024
DIGEST_REF = re.compile(r"@sha256:[0-9a-f]{64}$")
_BUILTIN_VARS = {"HOST_ADDRESS", "HEAD_ADDRESS"}
# --security-opt -> (securityContext fields, what it reads as)
_SECURITY_OPT = {"seccomp=unconfined": ({"seccompProfile": {"type": "Unconfined"}}, "seccompProfile.type: Unconfined"),
                 "apparmor=unconfined": ({"appArmorProfile": {"type": "Unconfined"}}, "appArmorProfile.type: Unconfined"),
                 "label=disable": ({"seLinuxOptions": {"type": "spc_t"}}, "seLinuxOptions.type: spc_t (SELinux off for the container)")}

# which of inkctl's hashes the annotation is (a recipe shows several: issue 29's first hour)
HASH_IS = ("the deployment hash, as on the containers' inkctl.recipe-hash label and `inkctl plan`'s "
           "'deployment' (recipe, inventory and image); `inkctl plan RECIPE` alone shows the recipe hash")


@dataclass(frozen=True)
class Cache:
    """Where the model cache comes from: an existing PVC or a path on every node."""

    kind: str  # "pvc" | "hostpath"
    source: str

    @classmethod
    def parse(cls, text: str) -> "Cache":
        kind, _, source = text.partition(":")
        if kind not in ("pvc", "hostpath") or not source or (kind == "hostpath" and not source.startswith("/")):
            raise InkctlError(f"--cache {text!r}: expected pvc:NAME or hostpath:/ABSOLUTE/PATH", exit_code=2)
        return cls(kind, source)

    def volume(self, read_only: bool) -> dict:
        if self.kind == "pvc":
            return {"persistentVolumeClaim": {"claimName": self.source, **({"readOnly": True} if read_only else {})}}
        return {"hostPath": {"path": self.source, "type": "Directory"}}


@dataclass(frozen=True)
class K8sOptions:
    namespace: str | None = None
    replicas: int = 1
    cache: Cache | None = None  # None: pvc:<name>-hf-cache
    secret_name: str | None = None  # None: <name>-secrets
    annotations: tuple[tuple[str, str], ...] = ()  # pod annotations, e.g. k8s.v1.cni.cncf.io/networks
    device_resources: tuple[tuple[str, str], ...] = DEFAULT_DEVICE_RESOURCES  # host device -> device-plugin resource
    host_network: bool = False
    offline: bool = True  # HF_HUB_OFFLINE=1: the cache holds the weights, no pod downloads them
    vars: tuple[tuple[str, str], ...] = ()  # values for the recipe's ${VARS} on every pod


@dataclass(frozen=True)
class Manifests:
    name: str
    documents: tuple[tuple[str, dict], ...]  # (file name, manifest)
    gaps: tuple[Gap, ...] = field(default=())

    @property
    def not_expressed(self) -> list[Gap]:
        return [g for g in self.gaps if not g.expressed]


def k8s_name(recipe_name: str) -> str:
    """A DNS-1035 label from a recipe name ('_' and '.' are not allowed there)."""
    name = re.sub(r"[^a-z0-9-]", "-", recipe_name)
    return name if name[0].isalpha() else f"inkctl-{name}"[:63]


def stand_in_hosts(recipe: Recipe, user_vars: dict[str, str]) -> list[Host]:
    """Hosts whose addresses and variables are tokens, so the plan's argv shows where each comes from."""
    referenced = referenced_vars(recipe.model_dump(mode="json"))
    vars_ = {n: var_token(n) for n in sorted(referenced - _BUILTIN_VARS)}
    vars_.update(RANK=RANK, HOST=POD_NAME)
    vars_.update(user_vars)
    return [Host(name="leader" if i == 0 else f"worker{i}", cluster_address=LEADER if i == 0 else POD_IP,
                 vars=vars_, state_dir="/var/lib/inkctl") for i in range(recipe.hardware.nodes)]




def k8s_plan(recipe: Recipe, options: K8sOptions, *, image: str | None = None,
             hotfix_pins: dict[str, str] | None = None, hotfix_files: dict[str, bytes] | None = None,
             weights_pinned: bool = False) -> Plan:
    return build_plan(recipe, stand_in_hosts(recipe, dict(options.vars)), read_fabric=False, image=image,
                      hotfix_pins=hotfix_pins, hotfix_files=hotfix_files, weights_pinned=weights_pinned)


def export_k8s(recipe: Recipe, options: K8sOptions, *, image: str | None = None,
               hotfix_pins: dict[str, str] | None = None, hotfix_files: dict[str, bytes] | None = None,
               weights_pinned: bool = False) -> Manifests:
    plan = k8s_plan(recipe, options, image=image, hotfix_pins=hotfix_pins, hotfix_files=hotfix_files,
                    weights_pinned=weights_pinned)
    return _Export(recipe, options, plan).manifests()


class _Export:
    def __init__(self, recipe: Recipe, options: K8sOptions, plan: Plan):
        self.r, self.o, self.plan = recipe, options, plan
        self.name = k8s_name(recipe.name)
        self.gaps: list[Gap] = []
        self.secret = options.secret_name or f"{self.name}-secrets"
        self.cache = options.cache or Cache("pvc", f"{self.name}-hf-cache")
        self.configmap: dict | None = None
        self.engine_configmap: dict | None = None
        self.nodes = recipe.hardware.nodes

    # --- the plan's steps --------------------------------------------------------------------
    def _runs(self, rank: int) -> list[Run]:
        """The container starts of one rank (the Run steps that carry their spec)."""
        return [s for s in self.plan.steps() if isinstance(s, Run) and s.rank == rank and s.container is not None]

    def _put(self, path: str) -> Put:
        return next(s for s in self.plan.puts() if s.path == path)

    def manifests(self) -> Manifests:
        if self.name != self.r.name:
            self.gaps.append(Gap("name", self.r.name, f"Kubernetes names allow no '_' or '.': named {self.name}"))
        self._up_only_gaps()
        leader = self._template(0)
        worker = self._template(1) if self.nodes > 1 else None
        lwt: dict = {"size": self.nodes, "restartPolicy": "RecreateGroupOnPodRestart"}
        if worker is not None:
            lwt["leaderTemplate"], lwt["workerTemplate"] = leader, worker
        else:
            lwt["workerTemplate"] = leader  # a group of one: the leader is made from the worker template
        # LeaderCreated, not LeaderReady: the leader turns ready only once the workers have joined it
        lws = {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": self._meta(self.name),
               "spec": {"replicas": self.o.replicas, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": lwt}}
        docs: list[tuple[str, dict]] = []
        if self.configmap is not None:
            docs.append(("configmap-hotfix.yaml", self.configmap))
        if self.engine_configmap is not None:
            docs.append(("configmap-engine.yaml", self.engine_configmap))
        docs += [("leaderworkerset.yaml", lws), ("service.yaml", self._service())]
        if self.r.fleet is not None:  # the router in front of the groups, finding their leaders by label
            from inkctl.export.k8s_fleet import router_manifests

            docs += router_manifests(self.r, self.name, self._meta, {LWS_NAME_LABEL: self.name, ROLE_LABEL: "head"},
                                     self._service()["spec"]["ports"][0]["port"])
        return Manifests(self.name, tuple(docs), tuple(self.gaps))

    def _up_only_gaps(self) -> None:
        """What ``up`` does from the control machine around the containers, that no manifest does."""
        smoke = [s for s in self.plan.steps() if isinstance(s, Smoke)]
        if smoke:
            self.gaps.append(Gap("smoke", smoke[0].purpose, "not run by Kubernetes: after the rollout, run `inkctl smoke RECIPE --url` "
                                 "through a port-forward (readiness alone does not prove an answer)", expressed=False))
        if self.r.watchdog_on:
            self.gaps.append(Gap("watchdog", f"MemAvailable < {self.r.watchdog.mem_available_min_gib:g} GiB kills the boot",
                                 "inkctl's boot watchdog runs only under `up`: give the pods a memory limit "
                                 "(resources.limits.memory) so the kubelet, not the kernel, stops a runaway load", expressed=False))

    def _meta(self, name: str) -> dict:
        meta: dict = {"name": name, "labels": {"app.kubernetes.io/name": self.name, "app.kubernetes.io/managed-by": "inkctl"}}
        if self.o.namespace:
            meta["namespace"] = self.o.namespace
        return meta

    # --- pod templates ---------------------------------------------------------------------------
    @staticmethod
    def _text(text: str, rank: int) -> str:
        """On the leader pod the leader's address is the pod's own IP (an IP, as VLLM_HOST_IP and
        ``ray start --node-ip-address`` want); the other ranks reach it as $(LWS_LEADER_ADDRESS)."""
        return text.replace(LEADER, POD_IP) if rank == 0 else text

    def _argv(self, argv: tuple[str, ...], rank: int) -> list[str]:
        return [self._text(a, rank) for a in argv]

    def _template(self, rank: int) -> dict:
        container_spec = next(s.container for s in self._runs(rank) if s.container is not None)
        run = from_spec(container_spec, lambda a: self._text(a, rank))
        command = [run.entrypoint, *run.command]
        ray_serve = next((s for s in self.plan.steps() if isinstance(s, Run) and s.argv[1:2] == ("exec",)
                          and SERVE_IN_HEAD in s.argv), None)
        if rank == 0 and ray_serve is not None:
            command = ["/bin/sh", "-c", self._ray_leader_script(command, ray_serve)]
        else:
            command = self._rendezvous(command, rank)
        volumes: list[dict] = []
        container = self._container(run, command, volumes, rank)
        role = "head" if rank == 0 else "worker"
        spec: dict = {"containers": [container]}
        if volumes:
            spec["volumes"] = volumes
        if self.o.host_network:
            spec.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
        meta: dict = {"labels": {"app.kubernetes.io/name": self.name, ROLE_LABEL: role},
                      "annotations": {"inkctl.recipe-hash": run.labels.get("inkctl.recipe-hash", self.plan.recipe_hash),
                                      "inkctl.recipe-hash-is": HASH_IS}}
        meta["annotations"].update(dict(self.o.annotations))
        return {"metadata": meta, "spec": spec}

    def _rendezvous(self, argv: list[str], rank: int) -> list[str]:
        """The plan's rank and group size, checked, as what LeaderWorkerSet provides."""
        out = list(argv)
        expected = {"--node-rank": (str(rank), RANK), "--nnodes": (str(self.nodes), GROUP_SIZE)}
        for i, a in enumerate(out[:-1]):
            if a in expected:
                value, token = expected[a]
                if out[i + 1] != value:
                    raise InkctlError(f"rank {rank}: the plan has {a} {out[i + 1]}, expected {value}")
                out[i + 1] = token
        return out

    def _ray_leader_script(self, head: list[str], serve_step: Run) -> str:
        """Ray head in the background, wait as the plan waits, then vllm serve as the main process."""
        wait = next(s for s in self.plan.steps() if isinstance(s, WaitFor) and s.expect_count == self.nodes)
        status = self._argv(wait.argv[3:], 0)  # (runtime, exec, container, *status)
        serve = self._argv(serve_step.argv[serve_step.argv.index(SERVE_IN_HEAD) + 2:], 0)
        return "\n".join([
            f"{command_line(head)} &",
            "ray_pid=$!",
            f"deadline=$(( $(date +%s) + {int(wait.timeout_s)} ))",
            f'until [ "$({command_line(status)} 2>/dev/null | grep -c -- {command_line([wait.expect or ""])})" -ge {GROUP_SIZE} ]; do',
            '  kill -0 "$ray_pid" 2>/dev/null || { echo "inkctl: the Ray head exited before the cluster formed" >&2; exit 1; }',
            f'  [ "$(date +%s)" -lt "$deadline" ] || {{ echo "inkctl: Ray did not see {GROUP_SIZE} nodes within {int(wait.timeout_s)}s" >&2; exit 1; }}',
            f"  sleep {max(1, int(wait.interval_s))}",
            "done",
            f"exec {command_line(serve)}",
        ])

    def _container(self, run: RunArgs, command: list[str], volumes: list[dict], rank: int) -> dict:
        r = self.r
        c: dict = {"name": ENGINE, "image": run.image, "imagePullPolicy": "IfNotPresent",
                   "command": [k8s_text(x) for x in command[:1]], "args": [k8s_text(x) for x in command[1:]]}
        self._check_vars(command, "the engine command")
        if rank == 0 and not DIGEST_REF.search(run.image):
            self.gaps.append(Gap("engine.image.ref", run.image, "not pinned by digest: each node pulls whatever the tag names then; "
                                 "pin REF@sha256:... in the recipe, or pass --image"))
        if run.pull == "never" and rank == 0:
            self.gaps.append(Gap("container", "--pull never", "imagePullPolicy: IfNotPresent: nodes pull the image from its registry"))
        env = self._env(run, rank)
        downward = [{"name": v, "valueFrom": {"fieldRef": {"fieldPath": DOWNWARD[v]}}}
                    for v in sorted(used_vars(command + [str(e.get("value", "")) for e in env]) & DOWNWARD.keys())]
        c["env"] = downward + [self._k8s_env(e) for e in env]
        port = r.engine.args.port
        c["ports"] = [{"name": "http", "containerPort": port}] if rank == 0 else []
        if not c["ports"]:
            del c["ports"]
        resources = self._resources(run, rank)
        if resources:
            c["resources"] = {"limits": resources}
        sc = self._security(run, rank)
        if sc:
            c["securityContext"] = sc
        mounts = self._mounts(run, volumes, rank)
        if mounts:
            c["volumeMounts"] = mounts
        if rank == 0:
            c.update(self._probes())
        self._network_gaps(run, rank)
        if run.unknown and rank == 0:
            self.gaps.append(Gap("container.extra_args", command_line(run.unknown),
                                 "no Kubernetes form: not in the manifests; add the equivalent to the pod yourself",
                                 expressed=False))
        return c

    def _k8s_env(self, e: dict) -> dict:
        if "value" in e:
            return {"name": e["name"], "value": k8s_text(e["value"])}
        return e

    def _check_vars(self, texts: list[str], where: str) -> None:
        missing = sorted({v for t in texts for v in unresolved_vars(t)})
        if missing:
            raise InkctlError(f"{where} uses ${{{missing[0]}}}, a host variable that has no value on Kubernetes",
                              hint="give every pod a value: " + " ".join(f"--var {m}=VALUE" for m in missing), exit_code=2)

    def _env(self, run: RunArgs, rank: int) -> list[dict]:
        env: list[dict] = []
        gpu_vars = ("NVIDIA_VISIBLE_DEVICES",)
        for k, v in run.env:
            if k in gpu_vars or unresolved_vars(v) == ["GPUS"]:
                if rank == 0:
                    self.gaps.append(Gap(f"container.env.{k}", f"--env {k}={shown(v)}",
                                         "left out: the GPU device plugin assigns the pod's GPUs (nvidia.com/gpu limit)"))
                continue
            self._check_vars([v], f"container.env.{k}")
            env.append({"name": k, "value": v})
        if self.o.offline and not any(k == "HF_HUB_OFFLINE" for k, _ in run.env):
            env.append({"name": "HF_HUB_OFFLINE", "value": "1"})
        for path in run.env_files:
            content = self._put(path).content
            assert isinstance(content, EnvFile)
            for k, entry in content.entries:
                if isinstance(entry, SecretRef):
                    env.append({"name": k, "valueFrom": {"secretKeyRef": {"name": self.secret, "key": entry.name}}})
                else:
                    env.append({"name": k, "value": entry})
        return env

    def _resources(self, run: RunArgs, rank: int) -> dict:
        limits: dict = {}
        if run.gpus:
            limits["nvidia.com/gpu"] = self.r.hardware.gpus_per_host
        mapped = dict(self.o.device_resources)
        for dev in run.devices:
            path = dev.split(":", 1)[0]
            if path in mapped:
                limits[mapped[path]] = 1
                if rank == 0:
                    self.gaps.append(Gap("container.devices", f"--device {dev}", f"resource limit {mapped[path]}: 1 (its device plugin must run on the nodes; "
                                         f"another name: --device-resource {path}=RESOURCE)"))
            elif rank == 0:
                self.gaps.append(Gap("container.devices", f"--device {dev}", "no device-plugin resource given: not in the manifests "
                                     f"(map it with --device-resource {path}=RESOURCE)", expressed=False))
        return limits

    def _security(self, run: RunArgs, rank: int) -> dict:
        sc: dict = {}
        if run.cap_add:
            sc["capabilities"] = {"add": list(run.cap_add)}
        if run.privileged:
            sc["privileged"] = True
        for opt in run.security_opt:
            if opt in _SECURITY_OPT:
                fields, text = _SECURITY_OPT[opt]
                sc.update(fields)
                if rank == 0:
                    self.gaps.append(Gap("container.security_opt", f"--security-opt {opt}", f"securityContext.{text}"))
            elif rank == 0:
                self.gaps.append(Gap("container.security_opt", f"--security-opt {opt}", "no pod securityContext equivalent: not in the manifests", expressed=False))
        for g in run.group_add if rank == 0 else ():  # ROCm's video group: a pod names groups by number
            self.gaps.append(Gap("container.gpus", f"--group-add {g}", "securityContext.supplementalGroups takes the "
                                 "group's number on the node: not in the manifests (AMD's device plugin grants GPU access)",
                                 expressed=False))
        for u in run.ulimits if rank == 0 else ():
            self.gaps.append(Gap(f"container.ulimits.{u.split('=')[0]}", f"--ulimit {u}",
                                 "a Pod cannot set ulimits: configure the nodes' container runtime (e.g. LimitMEMLOCK=infinity for containerd)",
                                 expressed=False))
        return sc

    def _mounts(self, run: RunArgs, volumes: list[dict], rank: int) -> list[dict]:
        mounts: list[dict] = self._shm(run, volumes, rank)
        cache_mounted = False
        state_dir = self.plan.host(self._runs(rank)[0].host).state_dir
        for i, (src, dst, ro) in enumerate(run.volumes):
            if src == f"{state_dir}/hotfix" and dst == MOUNT:
                self._hotfix_configmap(src)
                volumes.append({"name": "hotfix", "configMap": {"name": f"{self.name}-hotfix", "defaultMode": 0o755}})
                mounts.append({"name": "hotfix", "mountPath": dst, "readOnly": True})
            elif src == f"{state_dir}/engine" and dst == ENGINE_FILES:
                self._engine_configmap(src)
                volumes.append({"name": "engine-files", "configMap": {"name": f"{self.name}-engine"}})
                mounts.append({"name": "engine-files", "mountPath": dst, "readOnly": True})
            elif self._is_cache(src, dst):
                if not cache_mounted:
                    volumes.append({"name": "model-cache", **self.cache.volume(ro)})
                mounts.append({"name": "model-cache", "mountPath": dst, **({"readOnly": True} if ro else {})})
                if rank == 0 and not cache_mounted:
                    self.gaps.append(Gap("container.mounts", f"--volume {shown(src)}:{dst}",
                                         f"the model cache ({self.cache.kind} {self.cache.source}) at {dst}"))
                cache_mounted = True
            else:
                mounts.append(self._other_mount(i, src, dst, ro, volumes, rank))
        if not cache_mounted:
            volumes.append({"name": "model-cache", **self.cache.volume(False)})
            mounts.append({"name": "model-cache", "mountPath": HF_CACHE_DEFAULT})
            if rank == 0:
                self.gaps.append(Gap("container.mounts", "(no model cache mount)", f"the model cache mounted at {HF_CACHE_DEFAULT}"))
        return mounts

    def _shm(self, run: RunArgs, volumes: list[dict], rank: int) -> list[dict]:
        """/dev/shm: a memory-backed emptyDir where the container had the host's IPC or a size."""
        if not (run.ipc == "host" or run.shm_size):
            return []
        empty: dict = {"medium": "Memory"}
        if run.shm_size:
            empty["sizeLimit"] = quantity(run.shm_size)
        volumes.append({"name": "dshm", "emptyDir": empty})
        if rank == 0:
            what = " ".join(x for x in (f"--ipc {run.ipc}" if run.ipc else "", f"--shm-size {run.shm_size}" if run.shm_size else "") if x)
            self.gaps.append(Gap("container.ipc", what, "/dev/shm is a memory-backed emptyDir (no host IPC namespace)"))
        return [{"name": "dshm", "mountPath": "/dev/shm"}]

    def _other_mount(self, i: int, src: str, dst: str, ro: bool, volumes: list[dict], rank: int) -> dict:
        """A named volume (an emptyDir) or a host path (a hostPath every node must have)."""
        if src in {v.name for v in self.r.container.volumes}:
            volumes.append({"name": f"volume-{i}", "emptyDir": {}})
            if rank == 0:
                self.gaps.append(Gap("container.volumes", f"--volume {src}:{dst}", "an emptyDir: it lasts as long as the pod (use a PVC to keep it)"))
            return {"name": f"volume-{i}", "mountPath": dst, **({"readOnly": True} if ro else {})}
        self._check_vars([src], f"the mount at {dst}")
        volumes.append({"name": f"host-{i}", "hostPath": {"path": src}})
        if rank == 0:
            self.gaps.append(Gap("container.mounts", f"--volume {src}:{dst}", f"hostPath {src}: it must exist on every node"))
        return {"name": f"host-{i}", "mountPath": dst, **({"readOnly": True} if ro else {})}

    def _is_cache(self, src: str, dst: str) -> bool:
        env = dict(self.r.container.env)
        return dst.rstrip("/").endswith(("/.cache/huggingface", "/.cache/huggingface/hub")) or dst in (
            env.get("HF_HOME"), env.get("HF_HUB_CACHE"))

    def _engine_configmap(self, engine_dir: str) -> None:
        """The engine's own files (its spec's ``files``: text, each a key), in a ConfigMap of their own."""
        if self.engine_configmap is not None:
            return
        data = {s.path[len(engine_dir) + 1:]: str(s.content) for s in self.plan.puts()
                if s.rank == 0 and s.path.startswith(engine_dir + "/")}
        self.engine_configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": self._meta(f"{self.name}-engine"),
                                 "data": data}
        self.gaps.append(Gap("engine", f"--volume {engine_dir}:{ENGINE_FILES}:ro",
                             f"ConfigMap {self.name}-engine mounted at {ENGINE_FILES} ({', '.join(sorted(data))})"))

    def _hotfix_configmap(self, hotfix_dir: str) -> None:
        if self.configmap is not None:
            return
        data: dict[str, str] = {}
        binary: dict[str, str] = {}
        size = 0
        for s in self.plan.puts():
            if s.rank == 0 and s.path.startswith(hotfix_dir + "/"):
                key = s.path[len(hotfix_dir) + 1:]
                raw = s.content if isinstance(s.content, bytes) else str(s.content).encode()
                size += len(raw)
                try:
                    data[key] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    import base64

                    binary[key] = base64.b64encode(raw).decode()
        if size > CONFIGMAP_MAX:
            raise InkctlError(f"the hotfixes come to {size} bytes, over a ConfigMap's 1 MiB",
                              hint="bake them into the image instead: patches.mode: build, then inkctl build --push REGISTRY", exit_code=2)
        cm: dict = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": self._meta(f"{self.name}-hotfix"), "data": data}
        if binary:
            cm["binaryData"] = binary
        self.configmap = cm
        self.gaps.append(Gap("patches.hotfixes", f"--volume {hotfix_dir}:{MOUNT}:ro",
                             f"ConfigMap {self.name}-hotfix mounted at {MOUNT}; the wrapper still checks every sha256 before the engine starts"))

    def _probes(self) -> dict:
        health = next(s for s in self.plan.steps() if isinstance(s, WaitHealth))
        path = "/" + health.url.split("://", 1)[1].split("/", 1)[1]
        period = max(1, math.ceil(health.interval_s))
        budget = health.timeout_s + sum(s.timeout_s for s in self.plan.steps()
                                        if isinstance(s, WaitFor) and s.expect_count == self.nodes and self.nodes > 1)
        get = {"path": path, "port": "http"}
        return {"startupProbe": {"httpGet": get, "periodSeconds": period, "failureThreshold": math.ceil(budget / period)},
                "readinessProbe": {"httpGet": get, "periodSeconds": period, "failureThreshold": 3}}

    def _network_gaps(self, run: RunArgs, rank: int) -> None:
        if rank != 0:
            return
        if run.network == "host" and not self.o.host_network:
            self.gaps.append(Gap("container.network", "--network host", "the pod network; ranks find the leader at $(LWS_LEADER_ADDRESS) "
                                 "(--host-network keeps host networking)"))
        ifname = next((v for k, v in run.env if k == "NCCL_SOCKET_IFNAME"), None)
        if ifname and ifname != "eth0" and not self.o.host_network:
            self.gaps.append(Gap("network.socket_ifname", f"NCCL_SOCKET_IFNAME={ifname}",
                                 f"kept: {ifname} must exist inside the pod (a secondary network, or --host-network); "
                                 "for the pod network use --set network.socket_ifname=eth0"))
        if self.r.network.rdma and not any(k == "k8s.v1.cni.cncf.io/networks" for k, _ in self.o.annotations):
            self.gaps.append(Gap("network.rdma", "RDMA NICs", "no secondary network attached: pass "
                                 "--network-annotation k8s.v1.cni.cncf.io/networks=NAME (Multus) for the RDMA NICs",
                                 expressed=False))

    def _service(self) -> dict:
        port = self.r.engine.args.port
        if self.r.container.network == "bridge":
            port = next(p.host for p in self.r.container.ports if p.container == port)
        return {"apiVersion": "v1", "kind": "Service", "metadata": self._meta(self.name),
                "spec": {"selector": {LWS_NAME_LABEL: self.name, ROLE_LABEL: "head"},
                         "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]}}
