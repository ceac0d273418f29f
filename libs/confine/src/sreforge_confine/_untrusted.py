"""Files inside a folder an agent controls, read and written without following its links.

The agent owns its workspace (and its `.git`) and its HOME; a harness process on the
host that opens `root / relative` the plain way follows whatever symlink the agent
left at any component, and reads the engine home's credentials or the scenario's
answer key into the record. Here every component below `root` is opened relative to
its parent's descriptor with `O_NOFOLLOW`; the last is opened non-blocking (a FIFO
never blocks) and must be a regular file, read up to a stated cap. `root` itself is
the harness's own path (a bind-mount point the agent cannot replace) and is followed.
A refusal is an `UntrustedFileRefused` naming the path and why; a missing file is its
subclass `UntrustedFileMissing`, which callers usually treat as nothing there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePath, PurePosixPath
from typing import BinaryIO

from sreforge_confine._errors import UntrustedFileMissing, UntrustedFileRefused

__all__ = [
    "is_untrusted_file",
    "open_untrusted",
    "read_untrusted",
    "write_untrusted",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 16


def read_untrusted(root: Path, relative: str | PurePath, *, cap: int) -> bytes:
    """The whole regular file `root/relative`, at most `cap` bytes; refused (never cut)
    when longer, a link at any component, not a regular file, or outside `root`."""
    with open_untrusted(root, relative) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise UntrustedFileRefused(_shown(root, relative), f"{size} bytes, over {cap}")
        data = _read_capped(handle, cap + 1)
    if len(data) > cap:  # grew since the fstat
        raise UntrustedFileRefused(_shown(root, relative), f"over {cap} bytes")
    return data


def open_untrusted(root: Path, relative: str | PurePath) -> BinaryIO:
    """The regular file `root/relative` open for binary reading (the caller closes it,
    reading no more than it needs: the size is `os.fstat(handle.fileno()).st_size`)."""
    shown = _shown(root, relative)
    with _parent(root, relative) as (folder, name):
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
        except OSError as error:
            raise _refusal(shown, error, folder, name) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UntrustedFileRefused(shown, f"not a regular file ({_kind(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_untrusted_file(root: Path, relative: str | PurePath) -> bool:
    """True when `root/relative` is a regular file reached through no link (a FIFO,
    device, folder or link is not); never opens the file itself."""
    try:
        with _parent(root, relative) as (folder, name):
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except (OSError, UntrustedFileRefused):
        return False
    return stat.S_ISREG(mode)


def write_untrusted(
    root: Path, relative: str | PurePath, data: bytes, *, make_parents: bool = False
) -> None:
    """Replace `root/relative` with `data` atomically (a fresh file renamed over the
    name, so a link left there is replaced, never written through); `make_parents`
    creates missing folders, each reached through no link."""
    shown = _shown(root, relative)
    with _parent(root, relative, make_parents=make_parents) as (folder, name):
        temporary = f".{name}.{os.getpid()}.tmp"
        try:
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=folder,
            )
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            raise UntrustedFileRefused(shown, f"cannot write it: {error.strerror}") from None


@contextlib.contextmanager
def _parent(
    root: Path, relative: str | PurePath, *, make_parents: bool = False
) -> Iterator[tuple[int, str]]:
    """The descriptor of `relative`'s folder, reached from `root` through no link, and
    the last component's name."""
    shown = _shown(root, relative)
    parts = _parts(shown, relative)
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise _refusal(shown, error) from None
    try:
        for part in parts[:-1]:
            if make_parents:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=folder)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=folder)
            except OSError as error:
                raise _refusal(shown, error, folder, part) from None
            os.close(folder)
            folder = child
        yield folder, parts[-1]
    finally:
        os.close(folder)


def _parts(shown: str, relative: str | PurePath) -> list[str]:
    path = PurePosixPath(relative)
    if path.is_absolute() or not path.parts or ".." in path.parts or "\x00" in str(path):
        raise UntrustedFileRefused(shown, "not a plain relative path under its root")
    return [part for part in path.parts if part != "."]


def _refusal(
    shown: str, error: OSError, folder: int | None = None, name: str | None = None
) -> UntrustedFileRefused:
    if error.errno == errno.ENOENT:
        return UntrustedFileMissing(shown, "missing")
    if folder is not None and name is not None and error.errno in (errno.ELOOP, errno.ENOTDIR):
        with contextlib.suppress(OSError):
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                return UntrustedFileRefused(shown, f"{name} is a symbolic link")
            return UntrustedFileRefused(shown, f"{name} is not a folder ({_kind(mode)})")
    return UntrustedFileRefused(shown, f"cannot open it: {error.strerror or error}")


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISREG, "a regular file"),
    )
    return next((name for test, name in kinds if test(mode)), "unknown")


def _read_capped(handle: BinaryIO, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = handle.read(min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _shown(root: Path, relative: str | PurePath) -> str:
    return f"{root}/{relative}"
