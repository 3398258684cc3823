"""The Hub, from this machine: a model's commit and the metadata of the files the engine needs.

huggingface_hub is imported inside the functions (it pulls httpx and more). The endpoint is
``HF_ENDPOINT`` (a mirror, or the tests' stand-in), else huggingface.co; the token is the
recipe's HF token secret. The same endpoint and token reach the host that downloads.
"""

from __future__ import annotations

import json
import os
import tempfile

from inkctl.errors import InkctlError
from inkctl.recipe.manifest import DEFAULT_HUB, SAFETENSORS_INDEX, FileEntry, Manifest, needed_files

TOKEN_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


class HubError(InkctlError):
    exit_code = 2


def endpoint(recipe=None) -> str:
    """The Hub the hosts and this machine talk to: HF_ENDPOINT here, else the recipe's
    container env, else huggingface.co."""
    env = os.environ.get("HF_ENDPOINT") or (recipe.container.env.get("HF_ENDPOINT") if recipe else None)
    return (env or DEFAULT_HUB).rstrip("/")


def token_secret(recipe):
    """(name, Secret) of the recipe's HF token, resolved here; (None, None) when the recipe has
    none or its source is not set (public models need none)."""
    from inkctl.secret import resolve_secrets

    for name in TOKEN_NAMES:
        if name in recipe.secrets:
            try:
                return name, resolve_secrets(recipe.secrets, [name])[name]
            except InkctlError:
                return name, None
    return None, None


def _how(token_name: str | None, source: str) -> str:
    return (f"set {token_name} (the recipe's secret, read from {source}) to a token that may read it" if token_name
            else "add a token to the recipe (secrets: {HF_TOKEN: {env: HF_TOKEN}}) and export it")


def token_how(recipe) -> str:
    """What to do when the Hub refuses: the recipe's token secret to set, and where it is read."""
    name = next((n for n in TOKEN_NAMES if n in recipe.secrets), None)
    return "accept the model's terms on its page, then " + _how(name, recipe.secrets[name].describe() if name else "")


def _explain(e: Exception, repo: str, rev: str, where: str, token_name: str | None, have_token: bool,
             source: str = "") -> HubError:
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    status = getattr(getattr(e, "response", None), "status_code", None)
    how = _how(token_name, source)
    if isinstance(e, GatedRepoError) or status == 403:
        got = "the token was refused" if have_token else "no token was sent"
        return HubError(f"{repo} is gated on {where} ({status}): {got}",
                        hint=f"accept the model's terms on its page with your account, then {how}")
    if isinstance(e, RevisionNotFoundError):
        return HubError(f"{repo} has no revision {rev!r} on {where}",
                        hint="fix model.revision in the recipe (a branch, tag or full commit sha)")
    if isinstance(e, RepositoryNotFoundError) or status == 401:
        if have_token:
            return HubError(f"{repo}: not found on {where}, or the token may not read it ({status})",
                            hint="check model.repo and that the token's account can see the repository")
        return HubError(f"{repo}: {where} refused without a token ({status}): the repository is private, gated or does not exist",
                        hint=how + "; and check model.repo")
    if isinstance(e, HfHubHTTPError):
        return HubError(f"{repo}@{rev}: {where} answered {status}: {str(e).splitlines()[0]}")
    return HubError(f"{repo}@{rev}: cannot reach {where}: {type(e).__name__}: {e}",
                    hint="check the network, or set HF_ENDPOINT to a reachable mirror")


def pin(recipe) -> Manifest:
    """The model's commit and the manifest of the files the engine needs, asked of the Hub."""
    from huggingface_hub import HfApi, hf_hub_download

    repo = recipe.model.repo
    rev = recipe.model.revision or "main"
    where = endpoint(recipe)
    token_name, secret = token_secret(recipe)
    token = secret.reveal() if secret is not None else False  # False: never a token stored on this machine
    source = recipe.secrets[token_name].describe() if token_name else ""
    api = HfApi(endpoint=where, token=token)
    try:
        info = api.model_info(repo, revision=rev, files_metadata=True)
    except Exception as e:  # noqa: BLE001 - every Hub failure becomes one message
        raise _explain(e, repo, rev, where, token_name, secret is not None, source) from None
    siblings = {s.rfilename: s for s in info.siblings or []}
    index = None
    if SAFETENSORS_INDEX in siblings:
        with tempfile.TemporaryDirectory(prefix="inkctl-index-") as tmp:
            try:
                path = hf_hub_download(repo, SAFETENSORS_INDEX, revision=info.sha, cache_dir=tmp, token=token,
                                       endpoint=where)
                with open(path, "rb") as f:
                    index = json.load(f)
            except ValueError as e:
                raise HubError(f"{repo}@{info.sha}: {SAFETENSORS_INDEX} is not JSON: {e}") from None
            except Exception as e:  # noqa: BLE001
                raise _explain(e, repo, rev, where, token_name, secret is not None, source) from None
    w = recipe.model.weights
    names = needed_files(list(siblings), index, w.include, w.exclude)
    files = []
    for n in names:
        s = siblings[n]
        if s.size is None:
            raise HubError(f"{repo}@{info.sha}: {where} gave no size for {n}", hint="is HF_ENDPOINT a Hub (or a complete mirror)?")
        files.append(FileEntry(n, int(s.lfs.size if s.lfs else s.size), s.lfs.sha256 if s.lfs else None, s.blob_id))
    assert info.sha is not None  # the Hub names the commit of every revision it answers for
    return Manifest(repo, info.sha, rev, tuple(files))
