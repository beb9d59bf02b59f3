"""The one door to the ``ray`` extra: Ray, pyarrow and PyYAML, imported lazily.

Nothing else in trnsim imports ``ray``, ``pyarrow`` or ``yaml`` for sweeps, autotuning or the
Ray rank backend: callers ask :func:`ray`, :func:`pyarrow_parquet` or :func:`yaml` here, on
first use, and a missing library is one clear ``ExtraMissing`` (exit status 2) naming the extra
to install (as pandas' ``import_optional_dependency`` does). ``import trnsim`` and every verb
that does not need them never pay their import time (Ray's is about a second).

:func:`connect` is the one way trnsim reaches a Ray runtime: an existing cluster at an address
(checked with a short TCP connection first, so an unreachable address is one line in seconds,
not Ray's minute of retries), the runtime this process already joined, or a new local runtime
bound to 127.0.0.1 with no dashboard and no usage reporting.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import socket
from types import ModuleType

from trnsim.errors import UsageError

INSTALL = 'pip install "trnsim[ray]"  (in a checkout: pip install -e ".[ray]")'

# module -> what provides it (PyPI distribution) and what needs it
_PROVIDERS = {
    "ray": ("ray", "Ray backends (--ray, the Ray rank backend)"),
    "pyarrow": ("pyarrow", "Parquet sweep tables (.parquet)"),
    "yaml": ("PyYAML", "YAML sweep specs (.yaml/.yml; JSON specs need nothing)"),
}

CONNECT_TIMEOUT_S = 3.0
"""Seconds to wait for a TCP connection to a Ray address before calling it unreachable."""

LOCAL_HOST = "127.0.0.1"
"""The only address a local Ray runtime started by trnsim binds to."""


class ExtraMissing(UsageError, ImportError):
    """A library of the ``ray`` extra is not installed: the message says how to install it."""


def _load(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        dist, what = _PROVIDERS[module]
        raise ExtraMissing(
            f"{what} need {dist}, which is not installed ({exc}); install the extra: {INSTALL}"
        ) from None


def ray() -> ModuleType:
    """The ``ray`` module."""
    return _load("ray")


def pyarrow_parquet() -> tuple[ModuleType, ModuleType]:
    """``(pyarrow, pyarrow.parquet)``."""
    pa = _load("pyarrow")
    return pa, importlib.import_module("pyarrow.parquet")


def yaml() -> ModuleType:
    """The ``yaml`` module (PyYAML)."""
    return _load("yaml")


def available(module: str) -> bool:
    """True when ``module`` (``ray``, ``pyarrow``, ``yaml``) imports."""
    try:
        _load(module)
    except ExtraMissing:
        return False
    return True


def split_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port`` or ``ray://host:port``; None for ``auto``."""
    text = address.strip()
    if text == "auto":
        return None
    if text.startswith("ray://"):
        text = text[len("ray://") :]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray {address}: not a Ray address (host:port, ray://host:port or auto)")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A ``UsageError`` unless a TCP connection to ``address`` opens within ``timeout``."""
    where = split_address(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise UsageError(
            f"--ray {address}: cannot reach a Ray cluster there ({why} within {timeout:g} s); "
            "start one with 'ray start --head', or give --ray alone for a local runtime"
        ) from None


@contextlib.contextmanager
def _quiet_ray_logs() -> object:
    """Ray's INFO/WARNING lines (a started runtime, token authentication) stay off stderr."""
    log = logging.getLogger("ray")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's own switch for a node that serves only itself: with it off, Ray takes 127.0.0.1 as the
node's address (``ray/_private/services.py`` ``get_node_ip_address``, Ray 2.x), where it
would otherwise replace a loopback ``_node_ip_address`` by the machine's routable address
(``resolve_ip_for_localhost``) and serve the GCS and raylets there."""


@contextlib.contextmanager
def _loopback_only() -> object:
    """Ray processes started in the block listen on 127.0.0.1 only: the switch goes into the
    environment they inherit and into Ray's constant this process read at import."""
    constants = importlib.import_module("ray._private.ray_constants")
    saved_env, saved = os.environ.get(LOOPBACK_SWITCH), constants.ENABLE_RAY_CLUSTER
    os.environ[LOOPBACK_SWITCH] = "0"
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved
        if saved_env is None:
            os.environ.pop(LOOPBACK_SWITCH, None)
        else:
            os.environ[LOOPBACK_SWITCH] = saved_env


def connect(address: str | None = None, num_cpus: int | None = None) -> tuple[ModuleType, bool]:
    """``(ray, started)``: join the Ray runtime at ``address`` (``host:port``,
    ``ray://host:port`` or ``auto``), or with ``address`` None the runtime this process has
    already joined, else a new local one on 127.0.0.1 with ``num_cpus`` CPUs (default: all).
    ``started`` is True when this call started or joined it (the caller shuts it down)."""
    ray_mod = ray()
    if address is None and ray_mod.is_initialized():
        return ray_mod, False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network at run time
    with _quiet_ray_logs():
        if address is None:
            with _loopback_only():
                ray_mod.init(
                    address="local",
                    num_cpus=num_cpus,
                    include_dashboard=False,
                    _node_ip_address=LOCAL_HOST,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
            return ray_mod, True
        check_reachable(address)
        try:
            ray_mod.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except Exception as exc:  # Ray's own error: one line, the user's address to fix
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"--ray {address}: cannot join the Ray cluster: {text}") from None
    return ray_mod, True


def shutdown(ray_mod: ModuleType) -> None:
    """Leave (or stop) the runtime :func:`connect` started or joined."""
    with _quiet_ray_logs():
        ray_mod.shutdown()
