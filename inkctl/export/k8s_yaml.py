"""Manifests as YAML that reads like hand-written Kubernetes: keys in build order, scripts as blocks."""

from __future__ import annotations

import yaml


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # no &id001 anchors: each probe reads on its own
        return True


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120,
                         explicit_start=True)
