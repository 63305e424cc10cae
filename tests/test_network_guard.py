"""The socket guard of tests/conftest.py: loopback and unix sockets pass, anything else fails."""

import socket

import conftest
import pytest


def _swallow_attempts():
    got = list(conftest._attempts)
    del conftest._attempts[:]
    return got


def test_non_loopback_connections_are_refused_and_recorded():
    for addr in (("10.255.255.1", 9), ("8.8.8.8", 53)):
        with socket.socket() as s, pytest.raises(conftest.NetworkBlocked, match="socket guard"):
            s.connect(addr)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, pytest.raises(OSError):
        s.sendto(b"x", ("1.1.1.1", 53))
    with pytest.raises(OSError):
        socket.create_connection(("huggingface.co", 443), timeout=1)
    got = _swallow_attempts()
    assert len(got) >= 4 and "10.255.255.1" in got[0]


def test_a_swallowed_attempt_still_fails_the_test(monkeypatch):
    from tokendyn import models

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert models._hub_reachable(timeout=1) is False  # the guard looks like "offline" to the code
    assert _swallow_attempts()  # ...and the autouse fixture would fail this test without this line


def test_loopback_and_unix_sockets_pass(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
    with socket.socket(socket.AF_UNIX) as server:
        path = str(tmp_path / "s")
        server.bind(path)
        server.listen(1)
        with socket.socket(socket.AF_UNIX) as c:
            c.connect(path)
    assert not conftest._attempts
