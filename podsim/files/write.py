"""Writing: every output podsim writes takes one of three shapes, and each refuses in one line
(naming the option, the path and what is allowed) whatever is at the output path that is not
podsim's to replace.

- A file (`write_bytes_atomic`, `write_text_atomic`, `write_parquet`; `output_file` checks the
  path up front): absent or a regular file, its nearest existing ancestor a folder. The bytes go
  to a hidden temporary file beside it (`.NAME.podsim-XXXXXXXX.tmp`), are flushed to disk and
  renamed into place, so a failed or interrupted write leaves the old file or nothing.
- A folder podsim fills and replaces as a unit (`staged_folder`; `output_dir` checks the path up
  front): written into a hidden sibling (`.NAME.podsim-staging-XXXXXXXX`), then renamed into
  its place; an old folder is moved aside (`.NAME.podsim-old-XXXXXXXX`) for the moment between
  the two renames. An interrupted write leaves the old folder or nothing, never a mix.
- A folder podsim adds to (`claim_folder`: a sweep's results store and report).

A folder is podsim's when it is new, empty or holds MARKER, which every output folder podsim
makes holds. Anything else is refused: a device, a FIFO, a socket, a symbolic link, a file where
a folder goes (or a folder where a file goes), a folder of other files, '/', '.', '..', the
empty name, a path under something that is not a folder.

Staging a killed process (SIGKILL) left behind is removed by the next write into the same
folder: each temporary file and staging folder is locked (flock) while its writer lives, so one
whose lock is free is stale; a swap cut off between its two renames is undone (the old folder
put back), not lost. Only podsim's own names are touched.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from podsim.errors import PodsimError
from podsim.files.read import check_input_file, kind_of

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock (Windows): stale staging is left for the user
    fcntl = None

MARKER = ".podsim-output"  # in every output folder podsim makes: it may replace or add to such a folder
MARKER_TEXT = ("podsim wrote this folder. podsim replaces a non-empty output folder (podsim run --force, podsim demo,\n"
               "podsim trace export --force) or adds to it (podsim sweep) only when it holds this file.\n")
LOCK = ".podsim-lock"  # in a folder set aside during a swap, locked while the swap runs
_TMP = re.compile(r"\..+\.podsim-[a-z0-9_]{8}\.tmp")
_STAGED = re.compile(r"\..+\.podsim-(staging|old)-[a-z0-9_]{8}")
_NAME_CHARS = 100  # of NAME in the hidden names above (a file name is at most 255 bytes)
STALE_AFTER_S = 5.0  # younger staging is left alone: its writer may not have taken its lock yet


# What is at a path --------------------------------------------------------------------------
def _what_is(path: Path) -> str | None:
    """None if nothing is at `path` (not following a symbolic link), else 'a file',
    'a folder', 'a symbolic link', 'a named pipe (FIFO)', 'a device', 'a socket'."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # a part of the path is a file: _check_parent names it
    except OSError as exc:
        raise PodsimError(f"cannot reach {str(path)!r}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return kind_of(st.st_mode) or "a file"


def _check_parent(path: Path, flag: str) -> None:
    """The nearest ancestor of `path` that exists is a folder (symbolic links followed) podsim
    can write in: tried with a hidden folder made and removed at once, so a place nobody may
    write (/proc, a read-only mount) is refused before the work, not after it."""
    for anc in path.parents:
        try:
            st = os.stat(anc)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise PodsimError(f"{flag} {str(path)!r}: cannot reach {str(anc)!r}: {exc.strerror or exc}") from None
        kind = kind_of(st.st_mode)
        if kind != "a folder":
            raise PodsimError(f"{flag} {str(path)!r}: {str(anc)!r} is {kind or 'a file'}, not a folder; "
                              "give a path inside a folder")
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".podsim-probe-", dir=anc))
        except OSError as exc:
            raise PodsimError(f"{flag} {str(path)!r}: cannot write in {str(anc)!r}: {exc.strerror or exc}") from None
        return


def _named(text: str, flag: str, shape: str) -> Path:
    if not text.strip() or "\x00" in text:
        raise PodsimError(f"{flag} {text!r} is empty or holds a NUL; give a {shape} path")
    return Path(text)


def output_file(path: str | Path, flag: str = "output") -> Path:
    """`path` if podsim may write a file there: nothing is there or a regular file (replaced),
    and the nearest existing ancestor is a folder; else one line naming `flag`."""
    text = str(path)
    p = _named(text, flag, "file")
    kind = _what_is(p)
    if kind == "a folder":
        example = f", e.g. {str(p / 'out')!r}" if p.name not in ("", ".", "..") else ""
        raise PodsimError(f"{flag} {text!r} is a folder; give a file path{example}")
    if kind not in (None, "a file"):
        raise PodsimError(f"{flag} {text!r} is {kind}; podsim writes only a regular file there (a new path, or a "
                          "regular file it replaces)")
    _check_parent(p, flag)
    return p


def is_podsims(folder: Path) -> bool:
    """Whether `folder` holds MARKER: podsim made it."""
    return os.path.isfile(folder / MARKER)


def output_dir(path: str | Path, flag: str = "--out", *, force: bool = False, reuse: bool = False) -> Path:
    """`path` if podsim may make its output folder there: nothing is there, an empty folder, or
    a folder podsim made (MARKER) when `force` (it replaces it) or `reuse` (it adds to it).
    Anything else is one line naming `flag`, the path and what is allowed."""
    text = str(path)
    p = _named(text, flag, "folder")
    if p.name in ("", ".", ".."):
        raise PodsimError(f"{flag} {text!r} names no folder of its own ('/', '.', '..'); give a folder path, e.g. out/run")
    kind = _what_is(p)
    if kind is None:
        _check_parent(p, flag)
        return p
    if kind != "a folder":
        raise PodsimError(f"{flag} {text!r} is {kind}, not a folder; give a folder path (new, empty, or one podsim wrote)")
    try:
        entries = sorted(os.listdir(p))
    except OSError as exc:
        raise PodsimError(f"cannot read {flag} {text!r}: {exc.strerror or exc}") from None
    if not entries:
        return p
    if MARKER not in entries:
        first = next((e for e in entries if not e.startswith(".")), entries[0])
        raise PodsimError(f"{flag} {text!r} holds files podsim did not write (e.g. {first}); give a new or empty folder "
                          "(podsim replaces or adds to a folder only when it made it)")
    if not (force or reuse):
        first = next((e for e in entries if e != MARKER), MARKER)
        raise PodsimError(f"{flag} {text!r} is not empty (it holds {first}, from an earlier podsim run); give a new {flag}, "
                          "or --force to replace it whole once this one is done")
    return p


def output_folder(path: str | Path, what: str = "output folder") -> Path:
    """Create `path` (and its parents) as a plain folder; something other than a folder in the
    way, or no permission: one line naming the path."""
    text = str(path)
    p = _named(text, what, "folder")
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as exc:
        raise PodsimError(f"cannot reach {what} {text!r}: {exc.strerror or exc}") from None
    if st is not None:
        kind = kind_of(st.st_mode)
        if kind != "a folder":
            raise PodsimError(f"{what} {text!r} is {kind or 'a file'}, not a folder; give a folder path")
        return p
    _check_parent(p, what)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PodsimError(f"{what} {text!r}: a file is in the way of this folder path") from None
    except OSError as exc:
        raise PodsimError(f"cannot create {what} {text!r}: {exc.strerror or exc}") from None
    return p


DUCKDB_MAGIC = b"DUCK"  # bytes 8-12 of every DuckDB database file (its main header)


def check_store(path: str | Path, read_only: bool) -> Path:
    """A results store's path before DuckDB opens it (it would block on a FIFO) and before any
    work: to read, an existing regular file; to write, absent or a regular file in a folder;
    an existing file must be a DuckDB database (another file is refused, not found out after a run)."""
    path = check_input_file(path, "results store") if read_only else output_file(path, "results store")
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            head = fh.read(12)
        if head[8:12] != DUCKDB_MAGIC:
            raise PodsimError(f"{str(path)!r} is not a podsim results store (not a DuckDB database); give a new path "
                              "or a store podsim run or podsim sweep wrote")
    return path


# Staging left by killed writers -----------------------------------------------------------
def _locked(fd: int) -> bool:
    """Take the exclusive lock on `fd` without waiting; False if another holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def clean_stale(folder: str | Path) -> list[str]:
    """Remove podsim's temporary files and staging folders in `folder` whose writer is gone (their
    lock is free and they are older than STALE_AFTER_S), putting back a folder a killed swap left
    aside; returns the names removed."""
    if fcntl is None:
        return []
    folder = Path(folder)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(".") and ".podsim-" in n]
    except OSError:
        return []
    removed = []
    for name in names:
        staged = _STAGED.fullmatch(name)
        if not staged and not _TMP.fullmatch(name):
            continue
        path = folder / name
        try:
            if time.time() - os.lstat(path).st_mtime < STALE_AFTER_S:
                continue
        except OSError:
            continue
        lock = path / (MARKER if staged and staged[1] == "staging" else LOCK) if staged else path
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue  # not ours (no lock), or finished meanwhile
        try:
            if not _locked(fd):
                continue  # its writer is alive
            if not staged:
                path.unlink(missing_ok=True)
            else:
                if staged[1] == "old":  # a swap killed between its renames: the old folder goes back
                    kept = [e for e in os.listdir(path) if e != LOCK]
                    if len(kept) == 1 and not os.path.lexists(folder / kept[0]):
                        os.replace(path / kept[0], folder / kept[0])
                shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def _usual_mode(path_or_fd, folder: bool = False) -> None:
    """mkstemp / mkdtemp make 0600 / 0700; give the output the mode the umask gives a new one."""
    umask = os.umask(0)
    os.umask(umask)
    mode = (0o777 if folder else 0o666) & ~umask
    if isinstance(path_or_fd, int):
        os.fchmod(path_or_fd, mode)
    else:
        os.chmod(path_or_fd, mode)


# Files ---------------------------------------------------------------------------------------
def write_bytes_atomic(path: str | Path, data: bytes, make_parents: bool = False, what: str = "output") -> Path:
    """Write `data` to a locked temporary file beside `path`, then rename it into place
    (`path` checked by output_file; `what` names the option in its errors)."""
    path = output_file(path, what)
    if make_parents:
        output_folder(path.parent)
    elif not path.parent.is_dir():
        raise PodsimError(f"{what} folder {str(path.parent)!r} does not exist")
    clean_stale(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:_NAME_CHARS]}.podsim-", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise PodsimError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until the rename: a live write is never cleaned
        with open(fd, "wb", closefd=False) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fd)
        _usual_mode(fd)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise PodsimError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return path


def write_text_atomic(path: str | Path, text: str, make_parents: bool = False, what: str = "output") -> Path:
    """write_bytes_atomic of UTF-8 text."""
    return write_bytes_atomic(path, text.encode("utf-8"), make_parents, what)


def write_parquet(path: str | Path, table) -> Path:
    """A pyarrow Table as Parquet at `path`, written beside it and renamed into place."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return write_bytes_atomic(path, buf.getvalue())


def write_new(path: str | Path, data: bytes) -> Path:
    """A new file in a staging folder podsim made (`staged_folder`): written as is, since the
    folder is renamed into place only once every file is in it."""
    path = Path(path)
    with open(path, "xb") as fh:
        fh.write(data)
    return path


# Folders ------------------------------------------------------------------------------------
def replace_folder(new: Path, out: Path) -> None:
    """Put the folder `new` (beside `out`) in place of `out`: renames on one file system, so
    `out` holds the old contents or the new, never a mix (a swap killed between the renames is
    undone by the next write into the parent: clean_stale)."""
    if not os.path.lexists(out):
        os.replace(new, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name[:_NAME_CHARS]}.podsim-old-", dir=out.parent))
    lock = os.open(old / LOCK, os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        os.replace(out, old / out.name)
        try:
            os.replace(new, out)
        except OSError:
            os.replace(old / out.name, out)  # put the old contents back
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
        os.close(lock)


@contextmanager
def staged_folder(out: str | Path, flag: str = "--out") -> Iterator[Path]:
    """A whole output folder staged beside `out` (a hidden sibling holding MARKER, locked while
    this runs) and renamed into its place when the block ends without an error; on an error or
    an interrupt it is removed and `out` keeps what it had. Check `out` with output_dir first."""
    out = Path(out)
    parent = output_folder(out.parent, f"{flag} {str(out)!r}: the folder it is in")
    clean_stale(parent)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name[:_NAME_CHARS]}.podsim-staging-", dir=parent))
        marker = os.open(staging / MARKER, os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise PodsimError(f"cannot write beside {flag} {str(out)!r}: {exc.strerror or exc}") from None
    try:
        if fcntl is not None:
            fcntl.flock(marker, fcntl.LOCK_EX)  # held until the rename: a live staging is never cleaned
        os.write(marker, MARKER_TEXT.encode())
        _usual_mode(staging, folder=True)
        yield staging
        replace_folder(staging, out)
    except OSError as exc:
        raise PodsimError(f"cannot write {flag} {str(out)!r}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(marker)


def claim_folder(out: str | Path, flag: str = "--out") -> Path:
    """An output folder podsim adds to (a sweep's store and report): new, empty or podsim's
    (output_dir with reuse), created and marked as podsim's."""
    out = output_dir(out, flag, reuse=True)
    output_folder(out, flag)
    clean_stale(out)
    if not is_podsims(out):
        write_text_atomic(out / MARKER, MARKER_TEXT)
    return out
