"""The local broker's port probe: a port whose last connection lingers in TIME_WAIT is free for the broker again."""

from __future__ import annotations

import socket

from streams.local_kafka import port_is_free


def _leave_in_time_wait() -> int:
    """A listening port whose server side closed a connection first (as a broker stopping does): TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM's server sockets on Linux
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = int(listener.getsockname()[1])
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server closes first: its end of the connection waits in TIME_WAIT
        client.recv(1)
        client.close()
    return port


def test_a_port_left_in_time_wait_is_free_and_a_listening_one_is_not() -> None:
    port = _leave_in_time_wait()
    assert port_is_free(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert not port_is_free(port)
