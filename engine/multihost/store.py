"""The group's key-value store: the head serves it on the rendezvous address, every host (the head
too) is a client of it. What torch.distributed's TCPStore gave the group (set, get, check, wait
with a timeout), without torch: a host that only sends load needs neither its import (1.5 CPU-s,
seconds on a busy box) nor its wheel.

Each request and answer is one frame: a 4-byte big-endian length, then a msgpack array. The
server reads frames of at most MAX_FRAME bytes and drops a connection that sends anything else;
it never trusts a value (the group seals and checks each one: engine/multihost/group.py)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

import msgspec

MAX_FRAME = 64 * 1024 * 1024  # a level's result with its histograms is tens of KB
MAX_CONNECTIONS = 256  # hosts and their second connections; more is someone else
CONNECT_RETRY_S = 0.1
_LENGTH = struct.Struct(">I")
_SET, _GET, _CHECK, _WAIT = "set", "get", "check", "wait"
_OK, _TIMEOUT, _BAD = 0, 1, 2


class StoreError(RuntimeError):
    """The store could not be reached, or its connection broke."""


def _send(sock: socket.socket, message: Any) -> None:
    body = msgspec.msgpack.encode(message)
    sock.sendall(_LENGTH.pack(len(body)) + body)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or None where the peer closed the connection first."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> Any:
    """One frame's message; None where the peer closed the connection or sent no frame of ours."""
    head = _read_exactly(sock, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    if size > MAX_FRAME:
        return None
    body = _read_exactly(sock, size)
    if body is None:
        return None
    try:
        return msgspec.msgpack.decode(body)
    except msgspec.DecodeError:
        return None


class StoreServer:
    """The head's store on a listening socket it owns from then on: a thread accepts, and a thread
    a connection answers it (a wait blocks only its own connection)."""

    def __init__(self, listener: socket.socket) -> None:
        self._listener = listener
        self._values: dict[str, bytes] = {}
        self._changed = threading.Condition()
        self._connections: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, name="store-accept", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._changed:
            for conn in list(self._connections):
                conn.close()
            self._changed.notify_all()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._changed:
                if len(self._connections) >= MAX_CONNECTIONS:
                    conn.close()
                    continue
                self._connections.add(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), name="store-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while (request := _receive(conn)) is not None:
                answer = self._answer(request)
                if answer is None:
                    return  # not a request of ours: drop the connection
                _send(conn, answer)
        except OSError:
            pass
        finally:
            with self._changed:
                self._connections.discard(conn)
            conn.close()

    def _answer(self, request: Any) -> list[Any] | None:
        """[status, value] for one request ([op, keys, value, timeout_s]); None for a malformed one."""
        if not (isinstance(request, list) and len(request) == 4 and isinstance(request[1], list)
                and all(isinstance(k, str) for k in request[1]) and isinstance(request[3], (int, float))):
            return None
        op, keys, value, timeout_s = request
        if op == _SET and len(keys) == 1 and isinstance(value, bytes):
            with self._changed:
                self._values[keys[0]] = value
                self._changed.notify_all()
            return [_OK, None]
        if op == _CHECK:
            with self._changed:
                return [_OK, all(k in self._values for k in keys)]
        if op in (_WAIT, _GET) and (op == _WAIT or len(keys) == 1):
            with self._changed:
                there = self._changed.wait_for(lambda: self._closed or all(k in self._values for k in keys),
                                               max(0.0, float(timeout_s)))
                if not there or self._closed:
                    return [_TIMEOUT, None]
                return [_OK, self._values[keys[0]] if op == _GET else None]
        return None


class StoreClient:
    """One connection to the store (one thread at a time: a lock keeps its requests in turn).
    Connecting retries until ``timeout_s`` (a member may start before its head); then every get
    waits at most ``timeout_s`` for its key."""

    def __init__(self, host: str, port: int, timeout_s: float, server: StoreServer | None = None) -> None:
        self.address = (host, port)
        self.timeout_s = timeout_s
        self.server = server  # the head's client keeps its server (and the group's port) open
        self._lock = threading.Lock()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._sock = socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
                break
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise StoreError(f"cannot reach the store at {host}:{port}: {exc.strerror or exc}") from None
                time.sleep(CONNECT_RETRY_S)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def set(self, key: str, value: str | bytes) -> None:
        self._call(_SET, [key], value.encode() if isinstance(value, str) else value, 0.0)

    def get(self, key: str) -> bytes:
        status, value = self._call(_GET, [key], None, self.timeout_s)
        if status == _TIMEOUT:
            raise TimeoutError(f"store key {key} not set within {self.timeout_s:g} s")
        return value

    def check(self, keys: Sequence[str]) -> bool:
        return bool(self._call(_CHECK, list(keys), None, 0.0)[1])

    def wait(self, keys: Sequence[str], timeout_s: float | None = None) -> None:
        """Until every key is set; TimeoutError after ``timeout_s`` (default: the client's)."""
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        if self._call(_WAIT, list(keys), None, wait_s)[0] == _TIMEOUT:
            raise TimeoutError(f"store keys {', '.join(keys)} not set within {wait_s:g} s")

    def close(self) -> None:
        self._sock.close()
        if self.server is not None:
            self.server.close()

    def _call(self, op: str, keys: list[str], value: bytes | None, wait_s: float) -> list[Any]:
        host, port = self.address
        with self._lock:
            try:
                # a head that vanished without closing the connection: bounded by one more timeout
                self._sock.settimeout(wait_s + self.timeout_s + 5.0)
                _send(self._sock, [op, keys, value, wait_s])
                answer = _receive(self._sock)
            except OSError as exc:
                raise StoreError(f"the store at {host}:{port} stopped answering: {exc.strerror or exc}") from None
        if not (isinstance(answer, list) and len(answer) == 2 and answer[0] in (_OK, _TIMEOUT)):
            raise StoreError(f"the store at {host}:{port} closed the connection")
        return answer


def serve(host: str, port: int, timeout_s: float) -> StoreClient:
    """The head's store on ``host``:``port`` only, and the head's own client of it."""
    family, kind, proto, _name, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(addr)
        listener.listen(128)
    except OSError:
        listener.close()
        raise
    server = StoreServer(listener)
    try:  # port 0: the one the system chose
        return StoreClient(host, listener.getsockname()[1], timeout_s, server=server)
    except BaseException:
        server.close()
        raise
