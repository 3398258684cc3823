"""Several models on one cluster behind one endpoint: a gateway file.

A gateway file lists recipes (each one engine group, one model) and where each runs on the
cluster's inventory (its hosts, a GPU subset on a shared host); one request router in front
routes every request to the group serving its ``model``. It is a file of its own, beside the
recipes it names, so each recipe stays what it is (deployable alone with ``inkctl up``)::

    name: lab
    gateway: {port: 30090}
    models:
      - {recipe: qwen.yaml, hosts: [h1], gpus: "0,1"}
      - {recipe: llama.yaml, hosts: [h1], gpus: "2,3"}

The router is vllm-router in its multi-model mode (``--enable-igw``): each group is
registered with the model it serves and a request goes to a group serving its ``model``. It
holds no secret: a client's ``Authorization`` header is passed to the engine as it came.
Why this router and not another: docs/gateway.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, field_validator

from inkctl.errors import Problem
from inkctl.recipe.fields import HostName, Name, Strict, default_of, empty_list
from inkctl.recipe.fleet import Router
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.loaded import Loaded


class Gateway(Router):
    """The one endpoint: vllm-router in multi-model mode, started by `up` as a container."""

    kind: Literal["vllm"] = Field("vllm", description="The router: 'vllm' (vllm-router with --enable-igw: it routes by the request's model). sglang-router's multi-model mode is not offered: 0.3.2 downloads a tokenizer vocabulary at start and exits on a cluster without internet access (docs/gateway.md).")
    port: int = Field(30090, ge=1, le=65535, description="Port of the one OpenAI-compatible endpoint (host network).")
    prometheus_port: int = Field(29090, ge=1, le=65535, description="Port of the router's Prometheus exporter (/metrics).")


class ModelGroup(Strict):
    """One model: a recipe (one engine group) and where it runs."""

    recipe: str = Field(min_length=1, description="The recipe file, relative to this file (a recipe without fleet:).")
    hosts: list[HostName] = Field(min_length=1, description="Inventory hosts (by name) the group runs on, in rank order: as many as the recipe's hardware.nodes.")
    gpus: Optional[str] = Field(None, pattern=r"^[0-9]+(,[0-9]+)*$", description="GPU indices the group uses on each of its hosts, e.g. '0,1'. Default: the inventory host's gpus (all). Groups sharing a host need disjoint subsets.")

    @field_validator("gpus", mode="before")
    @classmethod
    def _one_index(cls, v: object) -> object:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v


class GatewayFile(Strict):
    """Several recipes side by side on one inventory, behind one endpoint routing by model name."""

    name: Name = Field(description="Name of the whole: the router's deployment is NAME-gateway.")
    gateway: Gateway = Field(default_factory=default_of(Gateway), description="The router in front of every group.")
    port_stride: int = Field(10, ge=1, le=1000, description="Groups sharing a host get the engine's ports shifted by this much for each group before them on that host.")
    models: list[ModelGroup] = Field(min_length=2, description="The models, one engine group each.")
    notes: list[str] = Field(default_factory=empty_list, description="Free text.")


@dataclass
class LoadedGateway:
    spec: GatewayFile
    path: Path
    hosts: list[Host]  # the cluster's inventory
    groups: list[Loaded]  # every model's recipe, loaded from its own file
    positions: dict[tuple, tuple[int, int]] = field(default_factory=dict)
    warnings: list[Problem] = field(default_factory=list)

    def where(self, *path) -> str:
        """file:line:col of ``path`` in the gateway file (the nearest located parent)."""
        p = tuple(path)
        while p and p not in self.positions:
            p = p[:-1]
        at = self.positions.get(p)
        return f"{self.path}:{at[0]}:{at[1]}" if at else str(self.path)

    def problem(self, path: tuple, message: str, hint: str | None = None) -> Problem:
        """A problem of the gateway file at ``path`` (its nearest located parent's line)."""
        from inkctl.codes import code

        p = tuple(path)
        while p and p not in self.positions:
            p = p[:-1]
        at = self.positions.get(p)
        return Problem(message, path=field_path(path), file=str(self.path), line=at[0] if at else None,
                       col=at[1] if at else None, hint=hint, code=code("gateway"))


def field_path(path: tuple) -> str:
    """("models", 1, "gpus") -> "models[1].gpus"."""
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def gateway_positions(path: Path, spec: GatewayFile) -> dict[tuple, tuple[int, int]]:
    """(line, col) of the gateway file's fields that its errors point at."""
    from inkctl.recipe.reading.document import parse_document

    doc = parse_document(path)
    positions: dict[tuple, tuple[int, int]] = {}
    keys: list[tuple] = [("gateway",), ("gateway", "host"), ("gateway", "port"), ("gateway", "prometheus_port")]
    for i, _ in enumerate(spec.models):
        keys += [("models", i), ("models", i, "recipe"), ("models", i, "hosts"), ("models", i, "gpus")]
    for key in keys:
        pos = doc.position(key)
        if pos:
            positions[key] = pos
    return positions


def load_gateway(path: str | Path, hosts_file: str | Path | None) -> LoadedGateway:
    """The gateway file, its inventory and every recipe it names; problems located in the file
    that has them (a recipe's own in the recipe)."""
    from inkctl.errors import UsageError
    from inkctl.recipe.reading.load import load_model
    from inkctl.recipe.reading.source import load_inventory, load_recipe

    path = Path(path)
    spec, warnings = load_model(GatewayFile, path)
    positions = gateway_positions(path, spec)
    if hosts_file is None:
        raise UsageError(f"{path}: a gateway file places its models on an inventory: pass --hosts FILE")
    hosts = load_inventory(hosts_file)
    groups = [load_recipe(path.parent / m.recipe) for m in spec.models]
    for g in groups:
        warnings += g.warnings
    return LoadedGateway(spec=spec, path=path, hosts=hosts, groups=groups, positions=positions, warnings=list(warnings))
