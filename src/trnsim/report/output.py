"""Everything the CLI writes: JSON on stdout and files on disk, one way each.

- ``print_json(data)``: strict JSON (never ``NaN`` or ``Infinity``: a non-finite number is a
  bug upstream and raises ``ValueError``), indented, one trailing newline.
- ``output_path(path, flag)``: checks, before any work, that ``path`` can be written (its
  directory exists and is writable, it is not a directory, nor a device or FIFO that the
  final rename would replace); raises ``UsageError`` naming the flag and the path.
- ``atomic_write(path, write)``: ``write(tmp_path)`` fills a temporary file beside ``path``,
  which is then renamed over it with mode 0644; the temporary is removed on any exit
  (exception, ``KeyboardInterrupt``, the exception a SIGTERM handler raises). An ``OSError``
  (no space, a read-only file system) becomes a ``UsageError`` naming the path.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trnsim.errors import UsageError

FILE_MODE = 0o644


def print_json(data: Any, **kwargs: Any) -> None:
    """Print ``data`` as strict JSON (``allow_nan=False``)."""
    kwargs.setdefault("indent", 2)
    print(json.dumps(data, allow_nan=False, **kwargs))


def output_path(path: str | os.PathLike[str], flag: str = "output") -> Path:
    """Return ``Path(path)`` if it can be written, else raise ``UsageError`` naming ``flag``."""
    if not str(path):
        raise UsageError(f"{flag}: empty path")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag}: {str(p)!r} is a directory, not a file")
    if p.exists() and not p.is_file():
        # a device, a FIFO, a socket (or a link to one): the rename that writes a file whole
        # would replace it (as root, /dev/null or /dev/zero itself). A dangling link is
        # writable: the rename replaces the link (the verbs compare their outputs' targets).
        raise UsageError(f"{flag}: {str(p)!r} is not a regular file (a device, a FIFO?)")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag}: directory {str(parent)!r} of {str(p)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: directory {str(parent)!r} is not writable")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{flag}: {str(p)!r} is not writable")
    # the permission bits are not the whole story (/proc, read-only mounts): try it
    with _temporary(parent, p.name, ".probe", f"{flag}: cannot write in {str(parent)!r}"):
        pass
    return p


@contextlib.contextmanager
def _temporary(directory: Path, name: str, suffix: str, refused: str) -> Iterator[str]:
    """A new empty file ``.NAME.XXXX{suffix}`` in ``directory``, removed on any exit unless
    renamed away; ``refused``: the ``UsageError`` text when it cannot be made.

    Its name is chosen (at random) and held before the file is made, inside the ``finally``
    that removes it: a stop (Ctrl-C, SIGTERM, a timeout) raised at any point, even the instant
    the file comes into being, finds the name held. No signal mask is needed, so a signal
    taken by another thread (then raised in this one) is covered too."""
    held: str | None = None
    try:
        for _ in range(100):
            candidate = os.path.join(directory, f".{name}.{secrets.token_hex(6)}{suffix}")
            held = candidate
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another's file (a 48-bit clash): not ours to remove
                held = None
                continue
            except OSError as exc:
                held = None
                raise UsageError(f"{refused}: {exc.strerror or exc}") from None
            os.close(fd)
            break
        else:  # pragma: no cover - 100 clashes of 48 random bits
            raise UsageError(f"{refused}: no free temporary name")
        yield candidate
    finally:
        if held is not None and os.path.exists(held):
            os.unlink(held)


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], Any]) -> Path:
    """Write ``path`` whole: ``write(tmp)`` fills a temporary file that is then renamed."""
    p = Path(path)
    with _temporary(p.parent or Path("."), p.name, ".tmp", f"cannot write {str(p)!r}") as tmp:
        try:
            write(tmp)
            os.chmod(tmp, FILE_MODE)
            os.replace(tmp, p)
        except OSError as exc:  # a full disk, a read-only file system: the user's to fix
            raise UsageError(f"cannot write {str(p)!r}: {exc.strerror or exc}") from None
    return p


def distinct_outputs(outputs: dict[str, Path], inputs: dict[str, str | os.PathLike[str]]) -> None:
    """Refuse two outputs of one command that are the same file (one would silently replace
    the other), or an output that is one of its inputs (the kernel file, a config): a
    ``UsageError`` naming both. ``outputs``: {flag: path}; ``inputs``: {what: path}."""
    seen: dict[str, str] = {}
    for what, path in inputs.items():
        seen.setdefault(_identity(path), what)
    for flag, path in outputs.items():
        key = _identity(path)
        if key in seen:
            raise UsageError(
                f"{flag} {str(path)!r} is the same file as {seen[key]}: give each output "
                "a path of its own"
            )
        seen[key] = f"{flag} {str(path)!r}"


def _identity(path: str | os.PathLike[str]) -> str:
    """One name per file: the resolved absolute path (symbolic links followed), or the device
    and inode for an existing file (a hard link is the same file)."""
    p = Path(path)
    try:
        st = p.stat()
        return f"inode:{st.st_dev}:{st.st_ino}"
    except OSError:
        return str(p.resolve())
