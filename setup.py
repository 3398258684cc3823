"""Packaging beyond pyproject.toml: the bundled recipes, examples, patches and the recipe
reference travel in the wheel as ``inkctl/share/<dir>/`` (see inkctl/bundled.py). In the source
tree they stay where people and tests look for them, at the repository root."""

from setuptools import find_packages, setup

SHARED = ("recipes", "examples", "patches", "docs")

setup(
    packages=find_packages(include=["inkctl", "inkctl.*"]) + [f"inkctl.share.{d}" for d in SHARED],
    package_dir={f"inkctl.share.{d}": d for d in SHARED},
    package_data={"inkctl": ["py.typed", "export/schemas/*.yaml", "export/schemas/*.md", "recipe/engine_releases/*.json"], **{f"inkctl.share.{d}": ["**/*"] for d in SHARED}},
    include_package_data=False,
)
