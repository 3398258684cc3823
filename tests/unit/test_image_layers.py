"""The image relay's layer filter (``relay_host.TarFilter``): a tar stream in, the same stream
out with the layers named emptied (what a host that has them loads), whatever the chunking;
members it does not know (other names, long names, pax headers) pass byte for byte."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from inkctl.execute.image.relay_host import TarFilter, chain_ids, layer_of


def archive(members: dict[str, bytes], fmt=tarfile.PAX_FORMAT, pax: dict | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax:
                info.pax_headers = dict(pax)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def filtered(data: bytes, digests, drop, chunk: int) -> bytes:
    out: list[bytes] = []
    f = TarFilter(digests, drop, out.append)
    for i in range(0, len(data), chunk):
        f.feed(data[i:i + chunk])
    return b"".join(out)


BASE, TOP = b"b" * 70000, b"t" * 1300
LONG = "x/" + "d" * 120 + "/file"  # a GNU/pax long name: passes whole


@pytest.mark.parametrize("chunk", [1, 511, 512, 4096, 1 << 20])
@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_a_dropped_layer_becomes_an_empty_file_and_the_rest_passes(chunk, fmt):
    members = {f"blobs/sha256/{digest(BASE)}": BASE, f"blobs/sha256/{digest(TOP)}": TOP,
               "manifest.json": b"[]", "index.json": b"{}"}
    if fmt != tarfile.USTAR_FORMAT:
        members[LONG] = b"long"
    src = archive(members, fmt)
    out = filtered(src, [digest(BASE), digest(TOP)], [digest(BASE)], chunk)
    assert len(out) < len(src) - len(BASE) + 1024
    with tarfile.open(fileobj=io.BytesIO(out)) as tf:
        got = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}
    assert got == {**members, f"blobs/sha256/{digest(BASE)}": b""}


def test_nothing_to_drop_or_an_unknown_layout_passes_byte_for_byte():
    podman = archive({f"{digest(BASE)}.tar": BASE, "manifest.json": b"[]"})
    assert filtered(podman, [digest(BASE)], [], 700) == podman
    legacy = archive({"0a1b/layer.tar": BASE, "0a1b/json": b"{}", "manifest.json": b"[]"})  # docker < 25
    assert filtered(legacy, [digest(BASE)], [digest(BASE)], 700) == legacy
    out = filtered(podman, [digest(BASE)], [digest(BASE)], 700)
    with tarfile.open(fileobj=io.BytesIO(out)) as tf:
        assert tf.getmember(f"{digest(BASE)}.tar").size == 0


def test_a_pax_header_of_a_dropped_layer_goes_with_it():
    name = f"blobs/sha256/{digest(BASE)}"
    src = archive({name: BASE, "manifest.json": b"[]"}, pax={"comment": "c" * 600})
    out = filtered(src, [digest(BASE)], [digest(BASE)], 1000)
    with tarfile.open(fileobj=io.BytesIO(out)) as tf:
        assert [(m.name, m.size) for m in tf.getmembers()] == [(name, 0), ("manifest.json", 2)]


def test_layers_are_known_by_their_digest_name_only():
    d = digest(BASE)
    assert layer_of(f"blobs/sha256/{d}", {d}) == d and layer_of(f"./{d}.tar", {d}) == d
    assert layer_of(f"blobs/sha256/{d}", set()) is None and layer_of(f"{d}/layer.tar", {d}) is None


def test_chain_ids_are_dockers():
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert chain_ids([a, b]) == [a, "sha256:" + hashlib.sha256(f"{a} {b}".encode()).hexdigest()]


@pytest.mark.parametrize("chunk", [1000, 1 << 20])
def test_docker_before_25_the_first_host_hashes_a_layer_to_know_it(tmp_path, chunk):
    """``<v1 id>/layer.tar``: the first host learns the diff id by hashing (on disk), drops what
    all have, and names the others' diff id in a pax record, by which a receiver empties what it has."""
    members = {"aa/layer.tar": BASE, "aa/json": b"{}", "bb/layer.tar": TOP, "manifest.json": b"[]"}
    src = archive(members, tarfile.USTAR_FORMAT)
    digests = [digest(BASE), digest(TOP)]
    out: list[bytes] = []
    f = TarFilter(digests, [digest(BASE)], out.append, spool_dir=str(tmp_path))
    for i in range(0, len(src), chunk):
        f.feed(src[i:i + chunk])
    stream = b"".join(out)
    assert f.dropped == [(digest(BASE), len(BASE))] and len(stream) < len(src) - len(BASE) + 2048
    with tarfile.open(fileobj=io.BytesIO(stream)) as tf:
        got = {m.name: (tf.extractfile(m).read(), m.pax_headers.get("INKCTL.layer")) for m in tf.getmembers()}
    assert got == {"aa/layer.tar": (b"", None), "aa/json": (b"{}", None), "bb/layer.tar": (TOP, digest(TOP)),
                   "manifest.json": (b"[]", None)}
    # a receiver that has TOP as well: knows it by its record
    mine = filtered(stream, digests, [digest(TOP)], 777)
    with tarfile.open(fileobj=io.BytesIO(mine)) as tf:
        assert tf.getmember("bb/layer.tar").size == 0 and tf.getmember("aa/json").size == 2
    assert not list(tmp_path.iterdir())  # the hashed copies are gone


def test_what_a_receiver_skips_docker_by_chain_podman_by_content_containerd_store_nothing():
    from inkctl.execute.image.relay import Node, _skip

    a, b, c = ("sha256:" + x * 64 for x in "abc")
    image = [a, b]
    docker = Node("h2", None, "docker", "", "", have=set(chain_ids([a, b])[:1]), by="chain")  # type: ignore[arg-type]
    assert _skip(docker, image) == {a}
    moved = Node("h3", None, "docker", "", "", have=set(chain_ids([c, b])), by="chain")  # type: ignore[arg-type]
    assert _skip(moved, image) == set()  # b on another base: another chain, docker loads it again
    podman = Node("h4", None, "podman", "", "", have={b}, by="diff")  # type: ignore[arg-type]
    assert _skip(podman, image) == {b}  # podman's store reuses a layer by its content
    store = Node("h5", None, "docker", "", "", have=set(chain_ids(image)), by="chain",  # type: ignore[arg-type]
                 whole="docker's containerd image store loads whole archives only")
    assert _skip(store, image) == set()
