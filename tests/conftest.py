"""Shared test settings: offline, deterministic, small, and no network.

The socket guard: a test that opens a connection to anything but this machine fails. Loopback
(``127.0.0.0/8``, ``::1``, ``localhost``: Ray and the browser test's local server live there), this
machine's own addresses, and unix sockets are allowed. The guard patches ``socket.socket``'s
``connect``, ``connect_ex`` and ``sendto``, and ``socket.getaddrinfo`` for names other than this
machine's, in the test process; the attempt raises
:class:`NetworkBlocked` (an ``OSError``, so code that probes for the network sees "offline"), and the
test fails at teardown even if the code under test swallowed the error. Subprocesses (papermill
kernels, Ray workers) are not covered; what they may reach is what the machine allows.
"""

import ipaddress
import os
import socket
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Hypothesis keeps its caches (character tables, constants) out of the checkout.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "tokendyn-hypothesis"))


class NetworkBlocked(OSError):
    """A test tried to reach another machine."""


_attempts: list[str] = []
_own_addresses: set[str] = set()


def _own() -> set[str]:
    """This machine's own interface addresses (Ray may bind its services to one of them)."""
    if not _own_addresses:
        _own_addresses.add("127.0.0.1")
        try:
            for info in socket.getaddrinfo(socket.gethostname(), None):
                _own_addresses.add(info[4][0])
        except OSError:
            pass
        try:
            import psutil

            for addrs in psutil.net_if_addrs().values():
                _own_addresses.update(a.address.split("%")[0] for a in addrs
                                      if a.family in (socket.AF_INET, socket.AF_INET6))
        except Exception:
            pass
    return _own_addresses


def _local(family: int, address) -> bool:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return True  # unix sockets, netlink and the like never leave the machine
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, bytes):
        host = host.decode()
    host = str(host).split("%")[0]
    if host in ("localhost", "", "0.0.0.0", "::"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a host name: resolving it and connecting is exactly what we refuse
    return ip.is_loopback or host in _own()


def _guarded(name: str, original):
    def method(self, *args):
        address = args[-1] if name == "sendto" else args[0]
        if not _local(self.family, address):
            _attempts.append(f"{name}({address!r})")
            raise NetworkBlocked(f"tests may not reach the network: {name}({address!r}) was refused "
                                 "by the socket guard in tests/conftest.py")
        return original(self, *args)

    method.__name__ = name
    return method


_ORIGINALS = {name: getattr(socket.socket, name) for name in ("connect", "connect_ex", "sendto")}
for _name, _orig in _ORIGINALS.items():
    setattr(socket.socket, _name, _guarded(_name, _orig))

_getaddrinfo = socket.getaddrinfo


def _guarded_getaddrinfo(host, *args, **kwargs):
    """Name lookups of other machines are network access too (and the first step of one)."""
    name = host.decode() if isinstance(host, bytes) else host
    if name is None or _local(socket.AF_INET, (name,)) or name == socket.gethostname() \
            or str(name).endswith(".localhost"):
        return _getaddrinfo(host, *args, **kwargs)
    _attempts.append(f"getaddrinfo({name!r})")
    raise NetworkBlocked(f"tests may not reach the network: getaddrinfo({name!r}) was refused by the "
                         "socket guard in tests/conftest.py")


socket.getaddrinfo = _guarded_getaddrinfo


@pytest.fixture(autouse=True)
def _no_network():
    """Fail any test that tried to open a non-loopback connection, even if the error was caught."""
    del _attempts[:]
    yield
    if _attempts:
        tried = ", ".join(_attempts[:5])
        del _attempts[:]
        pytest.fail(f"the test tried to reach the network: {tried}", pytrace=False)


@pytest.fixture(autouse=True)
def _torch_global_state():
    """A script's ``main`` run in-process sets torch's global grad mode and thread count for its
    run; restore both, so that no test depends on which tests ran before it."""
    import torch

    grad, threads = torch.is_grad_enabled(), torch.get_num_threads()
    yield
    torch.set_grad_enabled(grad)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
