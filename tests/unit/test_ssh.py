"""The SSH transport against a real sshd on loopback: host keys, ssh_config, run/put/stream.

One sshd per module (root, like the cluster tests: marked ``cluster``, so `-m 'not cluster'`
leaves it out; selected, it fails loudly when it cannot run), listening on 127.0.0.1 with a
throw-away host key. Each test gets its own HOME, so ~/.ssh/config and
~/.ssh/known_hosts are the test's own.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from inkctl.execute.hosts.connect import connect_all, connect_each, connect_host
from inkctl.execute.hosts.transport import HostError
from inkctl.recipe.hosts import Host
from tests.cluster.proc import wait_for

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module", autouse=True)
def _can_run():
    """A suite that skips itself on a machine without sshd proves nothing and says nothing: fail,
    naming what is missing and how to get it."""
    missing = [what for what, ok in (("root", os.geteuid() == 0), (SSHD, os.path.exists(SSHD)),
                                     ("ssh-keygen", shutil.which("ssh-keygen"))) if not ok]
    if missing:
        pytest.fail(f"the SSH suite cannot run: no {', '.join(missing)} (run it as root after "
                    f"tests/cluster/install.sh, or leave it out with -m 'not cluster')", pytrace=False)


# what a loaded 2-core machine may add to a bound (a paramiko handshake, thread switches):
# well under the next failure mode (a timeout applied twice, a stop noticed at the command's end)
SLACK = 1.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "inkctl-test", "-f", str(path)], check=True)
    return path


class Sshd:
    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        self.host_key = _keygen(root / "host_ed25519")
        self.client_key = _keygen(root / "client_ed25519")
        self.other_key = _keygen(root / "other_ed25519")
        auth = root / "authorized_keys"
        auth.write_text((root / "client_ed25519.pub").read_text())
        auth.chmod(0o600)
        cfg = root / "sshd_config"
        cfg.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}",
            f"PidFile {root / 'sshd.pid'}", f"AuthorizedKeysFile {auth}", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "UsePAM no", "UseDNS no",
            "StrictModes no", "AllowTcpForwarding yes", "MaxSessions 50", "Subsystem sftp internal-sftp", ""]))
        os.makedirs("/run/sshd", exist_ok=True)
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stderr=subprocess.DEVNULL)
        wait_for(f"sshd on 127.0.0.1:{self.port}", self.answers, timeout=10)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                return s.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    def key_line(self, name: str | None = None) -> str:
        typ, blob = (self.root / "host_ed25519.pub").read_text().split()[:2]
        return f"{name or f'[127.0.0.1]:{self.port}'} {typ} {blob}\n"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    s = Sshd(tmp_path_factory.mktemp("sshd"))
    yield s
    s.stop()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    (tmp_path / ".ssh").mkdir(mode=0o700)
    return tmp_path


def host(sshd, **kw) -> Host:
    base = dict(name="h1", address="127.0.0.1", port=sshd.port, user="root", identity_file=str(sshd.client_key))
    base.update(kw)
    return Host(**base)


def trust(home: Path, sshd) -> Path:
    kh = home / ".ssh" / "known_hosts"
    kh.write_text(sshd.key_line())
    return kh


# --- host keys ----------------------------------------------------------------------------

def test_fingerprint_is_openssh_format(sshd):
    import paramiko

    key = paramiko.Ed25519Key.from_private_key_file(str(sshd.host_key))
    want = subprocess.run(["ssh-keygen", "-lf", str(sshd.host_key) + ".pub"], capture_output=True, text=True).stdout.split()[1]
    assert key.fingerprint == want and "=" not in want  # what inkctl shows is what ssh-keygen shows


def test_unknown_host_key_is_refused_with_fingerprint_and_flag(sshd, home):
    want = subprocess.run(["ssh-keygen", "-lf", str(sshd.host_key) + ".pub"], capture_output=True, text=True).stdout.split()[1]
    with pytest.raises(HostError) as e:
        connect_host(host(sshd), accept_new=False)
    msg = e.value.render()
    assert e.value.cause == "unknown-host-key" and e.value.host == "h1"
    assert msg.startswith("h1: host key unknown") and "ED25519" in msg and want in msg
    assert "--accept-new-host-keys" in msg
    assert not (home / ".ssh" / "known_hosts").exists()


def test_accept_new_records_key_openssh_style(sshd, home):
    seen = []
    t = connect_host(host(sshd), accept_new=True, on_accept=lambda *a: seen.append(a))
    t.close()
    kh = (home / ".ssh" / "known_hosts").read_text()
    assert kh == sshd.key_line()  # "[127.0.0.1]:PORT ssh-ed25519 AAAA..." (port != 22)
    assert seen and seen[0][0] == "h1" and seen[0][2] == "ED25519"
    assert oct((home / ".ssh" / "known_hosts").stat().st_mode & 0o777) == "0o600"
    # OpenSSH itself accepts what was written
    r = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={home}/.ssh/known_hosts",
                        "-i", str(sshd.client_key), "-p", str(sshd.port), "root@127.0.0.1", "true"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # and the second connection needs no flag
    connect_host(host(sshd), accept_new=False).close()


def test_accept_new_hashes_when_the_file_is_hashed(sshd, home):
    from paramiko.hostkeys import HostKeys

    kh = home / ".ssh" / "known_hosts"
    typ, blob = (sshd.root / "other_ed25519.pub").read_text().split()[:2]
    kh.write_text(f"{HostKeys.hash_host('other.example')} {typ} {blob}\nnot a valid line\n")
    connect_host(host(sshd), accept_new=True).close()
    lines = kh.read_text().splitlines()
    assert len(lines) == 3 and lines[2].startswith("|1|") and f"{sshd.port}" not in lines[2]
    r = subprocess.run(["ssh-keygen", "-F", f"[127.0.0.1]:{sshd.port}", "-f", str(kh)], capture_output=True, text=True)
    assert r.returncode == 0 and "found" in r.stdout


def test_changed_host_key_is_refused_even_with_the_flag(sshd, home):
    kh = home / ".ssh" / "known_hosts"
    typ, blob = (sshd.root / "other_ed25519.pub").read_text().split()[:2]
    kh.write_text(f"[127.0.0.1]:{sshd.port} {typ} {blob}\n")
    before = kh.read_text()
    for flag in (False, True):
        with pytest.raises(HostError) as e:
            connect_host(host(sshd), accept_new=flag)
        msg = e.value.render()
        assert e.value.cause == "changed-host-key" and "CHANGED" in msg
        presented = subprocess.run(["ssh-keygen", "-lf", str(sshd.host_key) + ".pub"], capture_output=True, text=True).stdout.split()[1]
        expected = subprocess.run(["ssh-keygen", "-lf", str(sshd.other_key) + ".pub"], capture_output=True, text=True).stdout.split()[1]
        assert presented in msg and expected in msg
    assert kh.read_text() == before


def test_a_long_known_hosts_gives_each_client_its_own_host_and_a_rewrite_counts(sshd, home):
    """Each connection loads only the lines naming its host (plain or hashed) from a known_hosts
    parsed once per process; the same file rewritten in the same process (another key for the
    host, same length) is read again: the changed key is refused, not the cached one trusted."""
    from paramiko.hostkeys import HostKeys

    kh = home / ".ssh" / "known_hosts"
    typ, other = (sshd.root / "other_ed25519.pub").read_text().split()[:2]
    _, mine = (sshd.root / "host_ed25519.pub").read_text().split()[:2]
    name = f"[127.0.0.1]:{sshd.port}"
    many = "".join(f"10.9.{i // 250}.{i % 250} {typ} {other}\n" for i in range(500))
    kh.write_text(many + f"{HostKeys.hash_host(name)} {typ} {mine}\n")
    t = connect_host(host(sshd), accept_new=False)
    try:
        held = t._client.get_host_keys()  # type: ignore[attr-defined]
        assert len(held.keys()) == 1 and held.lookup(name) is not None
    finally:
        t.close()
    kh.write_text(many + f"{HostKeys.hash_host(name)} {typ} {other}\n")
    with pytest.raises(HostError) as e:
        connect_host(host(sshd), accept_new=False)
    assert e.value.cause == "changed-host-key"


def test_user_known_hosts_file_from_ssh_config(sshd, home):
    other = home / "kh-elsewhere"
    other.write_text(sshd.key_line())
    with pytest.raises(HostError) as e:  # the key is only in that file: unknown until ssh_config names it
        connect_host(host(sshd), accept_new=False)
    assert e.value.cause == "unknown-host-key"
    (home / ".ssh" / "config").write_text(f"Host *\n  UserKnownHostsFile {other}\n")
    t = connect_host(host(sshd), accept_new=False)
    try:
        assert t.run(["echo", "trusted"]).text() == "trusted\n"
    finally:
        t.close()
    assert other.read_text() == sshd.key_line()  # read, not rewritten
    assert not (home / ".ssh" / "known_hosts").exists()  # and nothing recorded elsewhere


# --- ssh_config ---------------------------------------------------------------------------

def test_alias_from_ssh_config(sshd, home):
    trust(home, sshd)
    (home / ".ssh" / "config").write_text(
        f"Host box1\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.client_key}\n")
    t = connect_host(Host(name="h1", address="box1"), accept_new=False)
    try:
        assert t.run(["echo", "hi"]).text() == "hi\n"
    finally:
        t.close()


def test_inventory_wins_over_ssh_config(sshd, home):
    trust(home, sshd)
    (home / ".ssh" / "config").write_text(f"Host 127.0.0.1\n  Port 1\n  User nobody\n  IdentityFile {sshd.other_key}\n")
    t = connect_host(host(sshd), accept_new=False)
    assert t.run(["id", "-un"]).text() == "root\n"
    t.close()


def test_proxy_jump(sshd, home):
    trust(home, sshd)
    # the jump host and the target are the same sshd; the target is reached through a direct-tcpip channel
    (home / ".ssh" / "config").write_text(
        f"Host jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.client_key}\n"
        f"Host target\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.client_key}\n  ProxyJump jump\n")
    t = connect_host(Host(name="h1", address="target"), accept_new=False)
    try:
        assert len(t._jumps) == 1
        assert t.run(["echo", "via jump"]).text() == "via jump\n"
    finally:
        t.close()


# --- connection errors ----------------------------------------------------------------------

def test_auth_failure_names_host_and_cause(sshd, home):
    trust(home, sshd)
    with pytest.raises(HostError) as e:
        connect_host(host(sshd, identity_file=str(sshd.other_key)), accept_new=False)
    assert e.value.cause == "auth" and e.value.message.startswith("h1: authentication failed for root@127.0.0.1")


def test_unreachable_and_timeout(home):
    with pytest.raises(HostError) as e:
        connect_host(Host(name="gone", address="127.0.0.1", port=_free_port()), accept_new=False)
    assert e.value.cause == "unreachable" and "gone:" in e.value.message and "refused" in e.value.message
    # a TCP server that never says a word: the handshake times out
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        t0 = time.monotonic()
        with pytest.raises(HostError) as e:
            connect_host(Host(name="mute", address="127.0.0.1", port=srv.getsockname()[1]), accept_new=False, timeout=1.0)
        took = time.monotonic() - t0
        assert e.value.cause == "timeout" and "mute:" in e.value.message, e.value.message
        # the 1 s timeout, waited once: not an instant failure, not a retry, not a hang
        assert 0.9 <= took < 1.0 + SLACK, f"{took:.2f} s"
    finally:
        srv.close()


def test_connect_all_is_all_or_nothing(sshd, home):
    trust(home, sshd)
    hosts = [host(sshd, name="good"), Host(name="bad", address="127.0.0.1", port=_free_port())]
    with pytest.raises(HostError) as e:
        connect_all(hosts, accept_new=False)
    assert "bad:" in e.value.message and "nothing was started" in e.value.message
    res = connect_each(hosts, accept_new=False)
    assert set(res.transports) == {"good"} and set(res.errors) == {"bad"}
    for t in res.transports.values():
        t.close()


# --- run / put / stream ---------------------------------------------------------------------

@pytest.fixture
def conn(sshd, home):
    trust(home, sshd)
    t = connect_host(host(sshd), accept_new=False)
    yield t
    t.close()


def test_a_channel_closed_before_its_command_starts_is_a_host_error(conn):
    """The connection can drop between a channel's open and its exec request (paramiko raises
    "Channel closed."): a HostError naming the host, never an internal error. Forced here by
    closing the real channel, then the real connection, between the two."""
    chan = conn._channel(5)
    chan.close()  # the connection stands: the host would not start the command
    with pytest.raises(HostError) as e:
        conn._exec(chan, ("true",))
    assert e.value.host == conn.name and "refused to start a command" in str(e.value)
    chan = conn._channel(5)
    conn._client.get_transport().close()  # the connection is gone
    with pytest.raises(HostError) as e:
        conn._exec(chan, ("true",), pty=True)
    assert e.value.host == conn.name and "connection lost" in str(e.value)
    with pytest.raises(HostError, match="connection lost"):
        conn.run(["true"])


def test_a_channel_sshd_turns_away_is_not_a_lost_host(conn):
    """sshd refuses a session past its MaxSessions (50 here) on a connection that stands: that is
    the host refusing one command (cause "command", asked again by who can), not the host lost."""
    held = [conn._channel(5) for _ in range(50)]
    try:
        with pytest.raises(HostError) as e:
            conn.run(["true"])
        assert e.value.cause == "command" and "refused a new SSH channel" in str(e.value), e.value
        assert conn.alive()
    finally:
        for c in held:
            c.close()
    assert conn.run(["true"]).exit_code == 0  # the same connection, once a session is free


def test_run_quotes_every_argument(conn):
    weird = ["a b", "$(id)", "`id`", "'q'", '"d"', "x;y", "new\nline", "ünï", "*", ""]
    res = conn.run(["printf", "%s|", *weird])
    assert res.ok and res.text() == "|".join(weird) + "|"


def test_run_exit_code_and_stderr(conn):
    res = conn.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (res.exit_code, res.text(), res.err_text()) == (7, "out\n", "err\n")


def test_run_streams_stdin(conn):
    chunks = (bytes([i % 256]) * 65536 for i in range(40))  # 2.5 MiB, never held whole
    res = conn.run(["sh", "-c", "wc -c"], stdin=chunks)
    assert res.ok and res.text().strip() == str(40 * 65536)
    assert conn.run(["cat"], stdin=b"hello").text() == "hello"


def test_run_timeout(conn):
    t0 = time.monotonic()
    with pytest.raises(HostError) as e:
        conn.run(["sleep", "60"], timeout=0.5)
    took = time.monotonic() - t0
    assert e.value.cause == "timeout" and 0.45 <= took < 0.5 + SLACK, f"{took:.2f} s"


def test_parallel_commands_share_one_connection(conn, tmp_path):
    """Eight commands on one connection at once: each waits until all eight have started (a
    barrier on the filesystem), which only completes if the channels really run in parallel."""
    results = []
    barrier = ('touch "$1/$2"; n=0; while [ "$(ls "$1" | wc -l)" -lt 8 ]; do n=$((n+1)); '
               '[ $n -gt 400 ] && { echo serial; exit 1; }; sleep 0.05; done; echo "$2"')
    threads = [threading.Thread(target=lambda i=i: results.append(
        conn.run(["sh", "-c", barrier, "sh", str(tmp_path), str(i)]).text())) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted(f"{i}\n" for i in range(8))


def test_put_is_atomic_creates_dirs_and_sets_mode(conn, tmp_path):
    target = tmp_path / "state" / "deep" / "rank0.env"
    conn.put(str(target), b"TOKEN=s3cret\n", 0o600)
    assert target.read_bytes() == b"TOKEN=s3cret\n" and oct(target.stat().st_mode & 0o777) == "0o600"
    conn.put(str(target), b"TOKEN=other\n", 0o600)  # overwrite in place
    assert target.read_bytes() == b"TOKEN=other\n"
    assert [p.name for p in target.parent.iterdir()] == ["rank0.env"]  # no temp file left


def test_put_failure_names_host(conn, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(HostError) as e:
        conn.put(str(tmp_path / "file" / "sub" / "x"), b"", 0o644)
    assert e.value.message.startswith("h1: cannot write")


def test_stream_lines_and_stop(conn):
    lines = []
    code = conn.stream(["sh", "-c", "echo one; sleep 0.1; echo two >&2; sleep 0.1; printf three; exit 3"], lines.append)
    assert code == 3 and lines == ["one", "two", "three"]
    stop = threading.Event()
    got = []

    def line(text):  # stop as soon as the first line arrived
        got.append(text)
        stop.set()

    t0 = time.monotonic()
    code = conn.stream(["sh", "-c", "echo started; sleep 60"], line, stop)
    took = time.monotonic() - t0
    assert code == -1 and got == ["started"] and took < SLACK, f"{took:.2f} s"  # at the stop, not at the exit


def test_stopping_a_stream_ends_the_remote_command(conn):
    """`logs -f` stopped on our side must not leave `docker logs --follow` running on the host."""
    import subprocess

    stop = threading.Event()
    marker = "31415926"

    def line(text):
        stop.set()

    assert conn.stream(["sh", "-c", f"echo go; exec sleep {marker}"], line, stop) == -1
    wait_for("the remote command to end with the stream",
             lambda: subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True).returncode != 0, timeout=20)
