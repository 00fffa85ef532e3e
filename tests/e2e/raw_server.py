"""A raw-socket HTTP server in a thread: each answer is bytes sent verbatim, then close.

aiohttp's server will not send a header value that is not text, or a broken
status line; this one sends whatever bytes it is given, so a test can play an
old or hostile server byte for byte. It listens on one port of several
loopback addresses (one host each), reads one request head per connection,
logs it, sends the answer and closes: the close ends every body, whatever its
headers claim, so no answer can hang the client.

``answer(host_index, request_target) -> bytes`` decides each answer; the
request target is the raw bytes of the request line (latin-1 decoded).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

ADDRESS_PREFIX = "127.0.44."
_READ_TIMEOUT_S = 10.0
_MAX_HEAD_BYTES = 64 * 1024

Answer = Callable[[int, str], bytes]


@dataclass(slots=True)
class Request:
    host: int  # index of the address it arrived on
    target: str  # request target as sent (latin-1)
    answer: bytes = b""  # what was sent back


@dataclass
class RawServer:
    answer: Answer
    hosts: int = 1
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    _sockets: list[socket.socket] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def base(self, host: int = 0) -> str:
        return f"http://{ADDRESS_PREFIX}{host + 1}:{self.port}"

    def __enter__(self) -> RawServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        for host in range(self.hosts):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((f"{ADDRESS_PREFIX}{host + 1}", self.port))
            self.port = sock.getsockname()[1]
            sock.listen(64)
            self._sockets.append(sock)
            thread = threading.Thread(target=self._accept, args=(host, sock), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        for sock in self._sockets:
            sock.close()  # accept() fails: the thread ends
        for thread in self._threads:
            thread.join(5)

    def _accept(self, host: int, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(host, conn), daemon=True).start()

    def _serve(self, host: int, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(_READ_TIMEOUT_S)
            try:
                head = _read_head(conn)
                if head is None:
                    return
                target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
                answer = self.answer(host, target)
                with self._lock:
                    self.requests.append(Request(host, target, answer))
                conn.sendall(answer)
                conn.shutdown(socket.SHUT_WR)
            except (OSError, IndexError):
                pass  # the client went away: nothing to answer


def _read_head(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < _MAX_HEAD_BYTES:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    return data
