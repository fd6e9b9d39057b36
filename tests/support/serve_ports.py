"""The port a server subprocess started with ``--port 0`` is listening on.

Picking a free port in the test (bind to 0, close, pass the number on) races: between the close and
the server's bind, another process may take the port. A server started on port 0 binds a port the
kernel picks and cannot lose it; these helpers find it afterwards:

* :func:`listening_port` reads ``/proc`` (Linux): the TCP sockets in LISTEN state held by the
  process or its descendants (``compaction serve --workers N`` listens in its workers).
* :func:`logged_port` reads uvicorn's "Uvicorn running on http://host:port" line from a log file,
  for servers that log at INFO (the LiteLLM proxy).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["listening_port", "logged_port"]

LISTEN = "0A"  # the state column of /proc/net/tcp
_UVICORN_RUNNING = re.compile(r"Uvicorn running on https?://[^\s:]+:(\d+)")


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [pid], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # the process is gone, or not ours
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def listening_ports(pid: int) -> set[int]:
    """Local ports of the TCP sockets in LISTEN state held by ``pid`` or its descendants."""
    inodes: set[str] = set()
    for process in _descendants(pid):
        inodes |= _socket_inodes(process)
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].split(":")[1], 16))
    return ports


def _wait(process: subprocess.Popen[bytes], find: Callable[[], int | None], deadline_s: float, what: str) -> int:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        port = find()
        if port is not None:
            return port
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode} before listening ({what})")
        time.sleep(0.1)
    raise AssertionError(f"the server was not listening after {deadline_s:g} s ({what})")


def listening_port(process: subprocess.Popen[bytes], deadline_s: float = 90) -> int:
    """The one port ``process`` (or its workers) listens on, once it listens (Linux only)."""

    def find() -> int | None:
        ports = listening_ports(process.pid)
        assert len(ports) <= 1, f"the server listens on several ports: {sorted(ports)}"
        return next(iter(ports), None)

    return _wait(process, find, deadline_s, f"pid {process.pid}")


def logged_port(process: subprocess.Popen[bytes], log: Path, deadline_s: float = 90) -> int:
    """The port in the "Uvicorn running on http://host:port" line of ``log``, once it is there."""

    def find() -> int | None:
        match = _UVICORN_RUNNING.search(log.read_text(errors="replace")) if log.exists() else None
        return int(match.group(1)) if match else None

    return _wait(process, find, deadline_s, str(log))
