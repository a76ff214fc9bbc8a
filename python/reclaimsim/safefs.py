"""Files a run makes on a shared machine, made so that nothing outside what the user named
is ever written or removed.

reclaimsim runs as root (kernel-run, calibrate) on machines other people share, where any
user can plant a name in /var/tmp, /dev/shm or /tmp before a run starts, and a symbolic
link planted under a name root is about to write or clean up turns that write into one on
the link's target. So:

- A run's scratch files live in a private directory made by mkdtemp (a fresh name, mode
  0700, owned by the run's user), never under a predictable name in a shared directory
  (`RunDir`). A user's `--workdir DIR` only says where that private directory goes: DIR's
  own files are never touched.
- The directory holds a marker file naming the process and, before each file is made, that
  file's name. Removal, at the end of the run or by a later run once the process is gone
  (`remove_stale`), unlinks exactly the recorded names through the directory's descriptor,
  which never follows a symbolic link, and then the directory if it is empty. A directory
  without the marker, of another owner, reached through a link, or whose process still
  lives is left alone.
- A file is created new (O_EXCL, which never follows a link) or not at all.
- A file replaced in place (a store's Parquet file, a copied kernel image) is written to a
  temporary file made by mkstemp beside it and renamed over it (`replace_atomically`): a
  link planted under a temporary name is never written through, and the rename replaces
  a link at the final name rather than writing to its target.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

# The marker file in a run's private directory: "reclaimsim PID WHAT", then one recorded
# file name per line.
MARKER = ".reclaimsim-run"
PREFIX = "reclaimsim-"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RunDir:
    """A private directory of this process under `parent` (mkdtemp: `reclaimsim-PID-XXXXXXXX`),
    with its marker. `file(name)` records a name before the caller makes the file;
    `create(name, data)` records and creates it (O_EXCL); `remove()` removes what was
    recorded and the directory."""

    def __init__(self, parent: Path, what: str):
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
        self._fd = os.open(self.path, _DIR_FLAGS)
        self._names: list[str] = []
        fd = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self._fd)
        with os.fdopen(fd, "w") as f:
            f.write(f"reclaimsim {os.getpid()} {what}\n")

    def file(self, name: str) -> Path:
        """Record `name` (a plain file name) as this run's, before it is made; its path."""
        _check_name(name)
        if name not in self._names:
            fd = os.open(MARKER, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._fd)
            with os.fdopen(fd, "w") as f:
                f.write(name + "\n")
            self._names.append(name)
        return self.path / name

    def create(self, name: str, data: bytes = b"") -> Path:
        """Record and create file `name` with `data` (mode 0600; never an existing file)."""
        p = self.file(name)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self._fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return p

    def discard(self, name: str) -> None:
        """Remove recorded file `name` now (it stays recorded; removing it again is a no-op)."""
        if name in self._names:
            _unlink_in(self._fd, name)

    def remove(self) -> None:
        """Remove every recorded file, the marker and the directory (when nothing else is
        in it). Safe to call twice."""
        if self._fd < 0:
            return
        for name in self._names:
            _unlink_in(self._fd, name)
        _unlink_in(self._fd, MARKER)
        os.close(self._fd)
        self._fd = -1
        try:
            os.rmdir(self.path)
        except OSError:
            pass

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..", MARKER) or "\0" in name:
        raise ValueError(f"{name!r}: not a plain file name")


def _unlink_in(dir_fd: int, name: str) -> None:
    """Unlink `name` in the directory `dir_fd` (a link itself, never its target); a name
    that is gone or a directory is left."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_pid(name: str) -> int | None:
    """The pid in a reclaimsim artifact's name (`reclaimsim-PID`, `reclaimsim-PID-...`,
    `reclaimsim-PID.x`) when that process is gone; None otherwise."""
    if not name.startswith(PREFIX):
        return None
    digits = name[len(PREFIX):].split("-", 1)[0].split(".", 1)[0]
    if not digits.isdigit() or not digits.isascii():
        return None
    pid = int(digits)
    return None if pid == 0 or _pid_alive(pid) else pid


def remove_stale(parent: Path) -> list[str]:
    """Remove the private directories under `parent` that reclaimsim runs killed outright
    left (SIGKILL gives no chance to clean up): only a real directory (not a link) owned by
    this user, named `reclaimsim-PID-...` for a process that is gone, holding a marker
    that names that process; in it only the recorded names. Returns the directories
    removed."""
    removed = []
    try:
        pfd = os.open(parent, _DIR_FLAGS)
    except OSError:
        return removed
    try:
        for name in sorted(os.listdir(pfd)):
            pid = stale_pid(name)
            if pid is None or "-" not in name[len(PREFIX):]:
                continue
            if _remove_if_ours(pfd, name, pid):
                removed.append(str(parent / name))
    finally:
        os.close(pfd)
    return removed


def _remove_if_ours(pfd: int, name: str, pid: int) -> bool:
    try:
        dfd = os.open(name, _DIR_FLAGS, dir_fd=pfd)  # O_NOFOLLOW: a link fails here
    except OSError:
        return False
    try:
        st = os.fstat(dfd)
        if st.st_uid != os.geteuid() or not stat.S_ISDIR(st.st_mode):
            return False
        try:
            mfd = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError:
            return False
        with os.fdopen(mfd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return False
            lines = f.read(1 << 20).decode("utf-8", "replace").splitlines()
        head = lines[0].split() if lines else []
        if len(head) < 2 or head[0] != "reclaimsim" or head[1] != str(pid):
            return False
        for n in lines[1:]:
            try:
                _check_name(n)
            except ValueError:
                continue
            _unlink_in(dfd, n)
        _unlink_in(dfd, MARKER)
    finally:
        os.close(dfd)
    try:
        os.rmdir(name, dir_fd=pfd)
    except OSError:
        return False  # something else is in it: not ours to remove
    return True


def replace_atomically(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write `path` whole or not at all: `write(f)` fills a temporary file made by mkstemp
    in `path`'s directory (a fresh name, O_EXCL), which is then renamed over `path`. On
    any error the temporary file is removed and the error raised."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _new_file_mode() -> int:
    """The mode open(2) would give a new file (0666 less the umask); mkstemp's is 0600."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
