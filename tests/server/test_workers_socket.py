"""``compaction serve --workers N`` spreads connections over its workers (one ``SO_REUSEPORT``
socket each), and reports a busy address in one line."""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from compaction.server.processes import reuse_port_socket
from tests.support.serve_ports import listening_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT balancing and /proc: Linux")


def test_reuse_port_sockets_share_the_connections_of_one_address() -> None:
    first = reuse_port_socket("127.0.0.1", 0)
    port = first.getsockname()[1]
    second = reuse_port_socket("127.0.0.1", port)
    holder = reuse_port_socket("127.0.0.1", port, listen=False)  # holds the address, takes no connection
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(32)]
    accepted = {first: 0, second: 0}
    with selectors.DefaultSelector() as selector:
        for sock in accepted:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 5
        while sum(accepted.values()) < len(clients) and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.1):
                listener = key.fileobj
                assert isinstance(listener, socket.socket)
                conn, _ = listener.accept()
                conn.close()
                accepted[listener] += 1
    for sock in [*clients, first, second, holder]:
        sock.close()
    assert sum(accepted.values()) == 32
    assert min(accepted.values()) > 0  # all on one socket: 2 ** -31 by chance


def test_an_address_in_use_is_refused() -> None:
    with socket.socket() as taken:  # a plain socket without SO_REUSEPORT
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError, match="in use"):
            reuse_port_socket("127.0.0.1", taken.getsockname()[1])


def _children(pid: int) -> list[int]:
    """The server's worker processes (multiprocessing's resource tracker left out)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == pid and b"resource_tracker" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                pids.append(int(entry))
    return pids


def _sockets_on(pid: int, port: int, state: str) -> int:
    """TCP sockets of process ``pid`` on local ``port`` in ``state`` (hex, as /proc/net/tcp has it)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == state and fields[9] in inodes:
            count += 1
    return count


STARTUP_GUARD_S = 300.0


def test_two_workers_each_take_connections_of_clients_that_connect_together(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "compaction.cli", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--db", str(tmp_path / "s.db"), "--workers", "2", "--log-level", "warning"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TOKENIZERS_PARALLELISM": "false"}
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    clients: list[socket.socket] = []
    try:
        # A hang guard, not a target: the supervisor and its two workers each import the app, which
        # took more than 60 s in 4 runs of 20 at load 13-24 on 2 cores.
        deadline = time.monotonic() + STARTUP_GUARD_S
        port = listening_port(server, deadline_s=STARTUP_GUARD_S)  # the port the supervisor took for its workers
        while len(_children(server.pid)) < 2 or not _ready(port):
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            assert time.monotonic() < deadline, f"the workers did not start in {STARTUP_GUARD_S:g} s"
            time.sleep(0.2)
        while sum(_sockets_on(pid, port, "0A") for pid in _children(server.pid)) < 2:  # 0A: LISTEN
            assert time.monotonic() < deadline, f"the workers did not both listen in {STARTUP_GUARD_S:g} s"
            time.sleep(0.2)
        # A burst: 24 connections made at once, as a client pool opens them. With one shared
        # listening socket, the first worker to wake accepts the whole queue.
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(24)]
        accepted_by = time.monotonic() + 15
        while True:  # until the workers have accepted all of them
            per_worker = [_sockets_on(pid, port, "01") for pid in _children(server.pid)]  # 01: ESTABLISHED
            if sum(per_worker) == 24 or time.monotonic() > accepted_by:
                break
            time.sleep(0.2)
        assert sum(per_worker) == 24, per_worker
        assert min(per_worker) > 0, per_worker  # the shared socket gave one worker all of them
    finally:
        for client in clients:
            client.close()
        server.terminate()
        server.wait(30)


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_workers_on_a_busy_address_exit_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "compaction.cli", "serve", "--port", str(port), "--workers", "2"]
        done = subprocess.run(
            [*command, "--db", str(tmp_path / "s.db")], capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Address already in use" in done.stderr
