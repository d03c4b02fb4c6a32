"""The candidate process of a driver run of code_v0's judge: it reads the code (frame 1)
with unbuffered reads, points fds 0-2 at ``/dev/null`` (it never sees frame 2, the tests),
loads the problem's preamble and the code, and answers calls over a socket: arguments in,
result out, both in the data-only codec of :mod:`.wire`. The driver forks it before it
reads the tests (:mod:`.driver`)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from .loading import load_candidate, read_frame
from .wire import Unsupported, encode, from_wire, perturb, receive_message, send_message, to_wire


def candidate_main(sock: socket.socket) -> None:  # pragma: no cover - runs in the sandbox
    """The candidate process (see the module docstring). Never returns."""
    try:
        spec = read_frame()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        sock.sendall(b"R")
    except BaseException:
        os._exit(1)
    function, status = load_candidate(spec)
    try:
        send_message(sock, encode(status))
        if status[0] == "loaded":
            serve(sock, function, bool(spec["perturb"]))
    finally:
        os._exit(0)


def answer(function: Any, call: Any, perturbed: bool) -> list[Any]:
    """The reply to one call ``[args, kwargs]`` (wire trees)."""
    try:
        args, kwargs = call
        result = to_wire(function(*map(from_wire, args), **{k: from_wire(v) for k, v in kwargs.items()}))
        reply = ["ok", perturb(result) if perturbed else result]
    except Unsupported as error:
        reply = ["unsupported", str(error)]
    except BaseException as error:
        reply = ["raise", type(error).__name__, str(error)[:2000]]
    try:
        encode(reply)
    except (ValueError, RecursionError):
        reply = ["unsupported", "a value JSON cannot carry"]
    return reply


def serve(sock: socket.socket, function: Any, perturbed: bool) -> None:  # pragma: no cover - in the sandbox
    """Answer ``["call", args, kwargs]`` and ``["batch", [[args, kwargs], ...]]`` until the
    driver closes the socket."""
    while True:
        try:
            message = json.loads(receive_message(sock))
        except EOFError:
            return
        if message[0] == "batch":
            send_message(sock, encode(["batch", [answer(function, call, perturbed) for call in message[1]]]))
        else:
            send_message(sock, encode(answer(function, message[1:], perturbed)))
