"""Patches: how a recipe changes the engine it runs.

Two ways, both from the field: ``build`` makes an image FROM a pinned base with files
replaced, edited or diffed, each checked by sha256 before and after (the RTX PRO 6000 registry record);
``at_start`` runs hotfix scripts inside a stock image before the engine starts ("Inkling on Two
DGX Sparks").
"""


from typing import Annotated, Literal, Optional, Union

from pydantic import Field

from inkctl.recipe.fields import ContainerPath, EnvName, FileName, Sha256, Strict, empty_list


class _FilePatch(Strict):
    path: Optional[ContainerPath] = Field(None, description="Absolute path of the file inside the image. Unknown (null) keeps the recipe from building.")
    sha256_before: Optional[Sha256] = Field(None, description="sha256 of the file as shipped in the base image. Null: unpinned (warned; pinned by `inkctl lock`).")
    sha256_after: Optional[Sha256] = Field(None, description="sha256 the file must have after patching. Null: unpinned.")
    sha256_before_prefix: Optional[str] = Field(None, pattern=r"^[0-9a-f]{4,63}$", description="Leading hex of sha256_before where a source gives only that; checked against what is observed.")
    sha256_after_prefix: Optional[str] = Field(None, pattern=r"^[0-9a-f]{4,63}$", description="Leading hex of sha256_after where a source gives only that.")
    note: Optional[str] = Field(None, description="What the patch does and why.")


class ReplaceFile(_FilePatch):
    """Replace a file in the image with one from patches/."""

    kind: Literal["replace"] = Field(description="Patch kind.")
    source: str = Field(description="File under the recipe's patches directory that becomes the new content.")


class Edit(Strict):
    old: str = Field(min_length=1, description="Exact text that must occur exactly once in the file.")
    new: str = Field(description="Replacement text.")


class EditFile(_FilePatch):
    """Exact-text edits of a file in the image; each 'old' must match exactly once."""

    kind: Literal["edit"] = Field(description="Patch kind.")
    edits: list[Edit] = Field(min_length=1, description="Edits applied in order.")


class DiffTarget(Strict):
    path: ContainerPath = Field(description="File the diff changes, inside the image.")
    sha256_before: Optional[Sha256] = Field(None, description="sha256 before the diff.")
    sha256_after: Optional[Sha256] = Field(None, description="sha256 after the diff.")


class DiffPatch(Strict):
    """A unified diff applied to files in the image (paths in the diff relative to 'root')."""

    kind: Literal["diff"] = Field(description="Patch kind.")
    source: str = Field(description="Unified diff under the recipe's patches directory.")
    root: ContainerPath = Field("/", description="Directory the diff's paths are relative to (patch -p1 runs there).")
    files: list[DiffTarget] = Field(min_length=1, description="Every file the diff touches, with its hashes.")
    note: Optional[str] = Field(None, description="What the diff does and why.")


FilePatch = Annotated[Union[ReplaceFile, EditFile, DiffPatch], Field(discriminator="kind")]


class Hotfix(Strict):
    """A script run inside the container before the engine starts (fail-closed)."""

    name: FileName = Field(description="File name the hotfix has on the host and in the container.")
    source: str = Field(description="File under the recipe's patches directory.")
    sha256: Optional[Sha256] = Field(None, description="sha256 of the hotfix file. Null: unpinned (warned; `inkctl lock` pins it).")
    interpreter: list[str] = Field(default=["python3"], min_length=1, description="Command that runs the hotfix inside the container.")
    gate_env: Optional[EnvName] = Field(None, description="Run only when this variable is set to a value other than '' or '0' in the container.")
    origin: Optional[str] = Field(None, description="Where the file comes from, when it is not in this repository.")
    note: Optional[str] = Field(None, description="What it fixes.")


class IncludedChange(Strict):
    """A change already inside a prebuilt image (provenance only)."""

    ref: str = Field(description="Commit or PR, e.g. '9d07a68'.")
    description: str = Field(description="What it changes.")


class Patches(Strict):
    """How the engine is patched."""

    mode: Literal["none", "build", "at_start", "prebuilt"] = Field(
        "none",
        description="'build': build engine.image from base with 'files'; 'at_start': run 'hotfixes' when the container starts; 'prebuilt': the image already carries 'included' changes; 'none'.",
    )
    base: Optional[str] = Field(None, description="Base image for mode 'build', by tag and preferably '@sha256:' digest.")
    files: list[FilePatch] = Field(default_factory=empty_list, description="File patches for mode 'build'.")
    hotfixes: list[Hotfix] = Field(default_factory=empty_list, description="Hotfix scripts for mode 'at_start'.")
    included: list[IncludedChange] = Field(default_factory=empty_list, description="Changes a prebuilt image already carries.")
    directory: str = Field("patches", description="Where patch sources are found, relative to the repository root (the directory holding recipes/).")

