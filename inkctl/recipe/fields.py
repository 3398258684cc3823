"""Shared field types for recipes and inventories: names, digests, host paths, variables."""

import re
from typing import Annotated, Callable, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def referenced_vars(document: object) -> set[str]:
    """Every ``${NAME}`` written anywhere in a dumped recipe (``recipe.model_dump(mode="json")``):
    what an export must supply for hosts it does not know yet."""
    if isinstance(document, str):
        return set(VAR_RE.findall(document))
    values = document.values() if isinstance(document, dict) else document if isinstance(document, list) else ()
    return set().union(*(referenced_vars(v) for v in values))


def empty_list() -> list:
    """``default_factory`` of a list field. A function of our own, not ``list``: pydantic reads the
    factory's signature, and a builtin's costs parsing its text signature, milliseconds per field
    (a fifth of `inkctl validate`'s start-up; benchmarks/startup.py)."""
    return []


Section = TypeVar("Section", bound=BaseModel)


def default_of(section: type[Section]) -> Callable[[], Section]:
    """``default_factory`` of a section that a recipe may leave out: the section with its
    defaults, made without running its validator. ``Section()`` would validate nothing (defaults
    are not validated) yet build the section's own validator first: a second schema of a model
    the recipe's validator already holds, a fifth of `inkctl validate`'s time (benchmarks/startup.py).
    The two are equal, field for field and in ``model_fields_set`` (tests/unit/test_recipe_defaults.py)."""
    def default() -> Section:
        return section.model_construct()

    default.__qualname__ = default.__name__ = f"default_{section.__name__}"
    return default


class Strict(BaseModel):
    """Base for every recipe section: unknown keys are errors, values are not coerced silently
    (``'8'`` is not a port, ``yes`` is not true, ``1.5`` is not an integer). The exceptions are
    declared where they are made: dates read from text, environment values (``EnvValue``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False, strict=True, defer_build=True)


def _env_text(v: object) -> object:
    """An environment value written as a number or true/false is its YAML text: ``1`` -> ``"1"``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return v


def _name(v: str) -> str:
    if not NAME_RE.match(v):
        raise ValueError(
            f"{v!r} is not a safe name: use 1-63 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (it becomes part of container and file names)"
        )
    return v


def _host_name(v: str) -> str:
    if not HOST_NAME_RE.match(v):
        raise ValueError(
            f"{v!r} is not a safe host name: use letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return v


def _env_name(v: str) -> str:
    if not ENV_NAME_RE.match(v):
        raise ValueError(f"{v!r} is not a valid environment variable name")
    return v


def _sha256(v: str) -> str:
    v = v.removeprefix("sha256:")
    if not SHA256_RE.match(v):
        raise ValueError(f"{v!r} is not a sha256 digest: expected 64 lowercase hex digits")
    return v


def _digest(v: str) -> str:
    if not DIGEST_RE.match(v):
        raise ValueError(f"{v!r} is not an image digest: expected 'sha256:' and 64 lowercase hex digits")
    return v


def _file_name(v: str) -> str:
    if not FILE_NAME_RE.match(v) or len(v) > 128:
        raise ValueError(f"{v!r} is not a safe file name: letters, digits, '.', '_' or '-'")
    return v


def _host_path(v: str) -> str:
    if not v:
        raise ValueError("a path cannot be empty")
    if "\n" in v or "\x00" in v:
        raise ValueError("a path cannot contain a newline or NUL")
    if ":" in v:
        raise ValueError(f"{v!r} contains ':', which a container mount cannot express")
    if not (v.startswith("/") or v.startswith("${")):
        raise ValueError(f"{v!r} is not absolute: start with '/' or a variable such as ${{HOME}}")
    return v


def _container_path(v: str) -> str:
    if not v.startswith("/") or ":" in v or "\n" in v or "\x00" in v:
        raise ValueError(f"{v!r} is not an absolute path inside the container (no ':' or newline)")
    return v


Name = Annotated[str, AfterValidator(_name)]
HostName = Annotated[str, AfterValidator(_host_name)]
EnvName = Annotated[str, AfterValidator(_env_name)]
Sha256 = Annotated[str, AfterValidator(_sha256)]
ImageDigest = Annotated[str, AfterValidator(_digest)]
FileName = Annotated[str, AfterValidator(_file_name)]
HostPath = Annotated[str, AfterValidator(_host_path)]
ContainerPath = Annotated[str, AfterValidator(_container_path)]
EnvValue = Annotated[str, BeforeValidator(_env_text)]  # numbers and true/false become their text
