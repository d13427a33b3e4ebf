"""Paths another local user could change under a run: one definition of what the suite trusts.

A benchmark is often run as root, in shared folders (/tmp, a team's results folder). Whoever can
rename a folder on a path, re-point a link on it, or add a file to a folder the run reads or writes,
can make the run load their code or write through their link. So before a run imports, loads,
executes or writes anything at a path the user (or a default) named, the path is checked here:

* **Code** (a file imported with ``--op``, a build folder whose libraries are loaded, a folder on
  a child's ``PYTHONPATH``, the instruction-count stage): every folder from ``/`` down to it, and
  it, must be owned by this user or root; none may be writable by others (a sticky folder such as
  /tmp is accepted *above* it: no one else can rename or replace our entry there); no link on the
  way may belong to anyone else. The caller then uses the resolved path, so re-pointing a link
  after the check changes nothing.
* **Outputs** (a result folder and the folders made inside it): the folder must belong to this
  user and be writable by no one else, sticky or not (in a 1777 folder another user can plant
  the names we are about to create); the folders above it must be owned by this user or root and
  not writable by others unless sticky, and no link on the way may belong to anyone else.

"Writable by others" counts the group too, except a user-private group (the group of our own
uid's name with no other members: Debian's default for accounts), whose write bit gives no one
else access. Standard library only: bench/harness/cli.py checks paths before torch is imported.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

TRUSTED_UIDS = frozenset({0})  # root, besides the current user


class UntrustedPathError(ValueError):
    """A path another local user could change; the message names the path, who owns it and the fix."""


def describe(st: os.stat_result) -> str:
    """`owner uid N, mode drwxrwxrwt`: what a refusal shows of a path."""
    return f"owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}"


def _trusted_owner(uid: int) -> bool:
    return uid == os.getuid() or uid in TRUSTED_UIDS


def _private_group(gid: int) -> bool:
    """A group no one but this user belongs to (a user-private group), so its write bit is ours."""
    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return False
    return gid == os.getgid() and group.gr_name == me and set(group.gr_mem) <= {me}


def others_can_write(st: os.stat_result) -> bool:
    """Someone but its owner (and root) can create, remove or rename entries (or write the file)."""
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and not _private_group(st.st_gid)


def _link_problem(path: Path) -> str | None:
    """The first link on the way to `path` that belongs to another user (who can re-point it)."""
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = current / part
        try:
            st = os.lstat(current)
        except OSError:
            return None  # the rest does not exist yet: nothing to re-point
        if stat.S_ISLNK(st.st_mode):
            if not _trusted_owner(st.st_uid):
                return f"{current} is a link owned by another user ({describe(st)}), who can re-point it"
            # Follow it: the links inside its target count as well.
            inner = _link_problem(Path(os.path.realpath(current)))
            if inner:
                return inner
    return None


def _ancestor_problem(folder: Path, *, owned: bool) -> str | None:
    """The first folder from `folder` up to / that another user could change. `owned`: it must also
    be owned by this user or root (the folders above code)."""
    for parent in [folder, *folder.parents]:
        try:
            st = os.stat(parent)
        except OSError as exc:
            return f"cannot check {parent}: {exc.strerror or exc}"
        if owned and not _trusted_owner(st.st_uid):
            return f"{parent} belongs to another user ({describe(st)})"
        if others_can_write(st) and not st.st_mode & stat.S_ISVTX:
            return f"others can write in {parent} and it is not sticky ({describe(st)})"
    return None


def _path_problem(path: Path | str, *, ours_only: bool, inside: str = "") -> str | None:
    """The first way another user could change `path` (None: there is none): a link of theirs on the
    way; `path` owned by someone but us (and root, unless `ours_only`) or writable by others; a
    folder above it owned by another user, or writable by others and not sticky (the owner of a
    folder above can always rename our entry, after a chmod if need be). `inside`: how the
    message names writing (``"in "`` for a folder written into)."""
    path = Path(os.path.abspath(path))
    problem = _link_problem(path)
    if problem:
        return problem
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except OSError as exc:
        return f"cannot check {real}: {exc.strerror or exc}"
    if st.st_uid != os.getuid() and (ours_only or not _trusted_owner(st.st_uid)):
        return f"{real} belongs to another user ({describe(st)})"
    if others_can_write(st):
        return f"others can write {inside}{real} ({describe(st)})"
    return _ancestor_problem(real.parent, owned=True)


def code_path_problem(path: Path | str) -> str | None:
    """Why code at `path` (a file or a folder whose files are loaded) could be another user's
    (None: it cannot): it and the folders above must be ours or root's. The path must exist."""
    return _path_problem(path, ours_only=False)


def entry_folder_problem(folder: Path | str) -> str | None:
    """Why another user could rename or replace an entry we make in the existing `folder` (None: they
    cannot): a link of theirs on the way, or `folder` or a folder above it owned by them, or writable
    by others and not sticky. For a private folder we create there and then run code from (the
    instruction-count stage in /tmp)."""
    folder = Path(os.path.abspath(folder))
    return _link_problem(folder) or _ancestor_problem(Path(os.path.realpath(folder)), owned=True)


def trusted_code_path(path: Path | str, what: str, *, missing_ok: bool = False) -> Path:
    """`path` resolved, after code_path_problem found nothing; else UntrustedPathError naming `what`
    (e.g. "the --op file") and the fix. Use the returned path from then on.
    missing_ok: a path not there (yet) is accepted when the nearest folder above its resolved path
    that is there passes code_path_problem, so no one else can create it (the caller then finds
    nothing to load, and says so)."""
    real = Path(os.path.realpath(path))
    checked = real
    while missing_ok and not checked.exists() and checked != checked.parent:
        checked = checked.parent
    problem = code_path_problem(path) if checked == real else (_link_problem(Path(os.path.abspath(path)))
                                                               or code_path_problem(checked))
    if problem:
        raise UntrustedPathError(f"refusing {what} {path}: {problem}; another local user could put their "
                                 f"code there. Use a copy in a folder only you (or root) can write")
    return real


def output_folder_problem(folder: Path | str) -> str | None:
    """Why writing into the existing `folder` would let another user plant or swap what the run
    writes (None: it would not): it must be ours (not root's, when we are not root) and writable
    by no one else, sticky or not."""
    return _path_problem(folder, ours_only=True, inside="in ")


def _missing_parts(folder: Path) -> tuple[list[Path], Path]:
    """The folders that `folder` still needs, deepest first, and the nearest one that exists."""
    missing = []
    current = Path(os.path.abspath(folder))
    while not current.exists() and current != current.parent:
        if os.path.lexists(current):  # a dangling link in place of a folder
            raise UntrustedPathError(f"refusing the output folder {folder}: {current} is a dangling link")
        missing.append(current)
        current = current.parent
    return missing, current


def _swap_refusal(folder: Path, nearest: Path) -> UntrustedPathError | None:
    """Why a folder still to be made under `nearest` could be swapped by another user (None: it could not)."""
    problem = _link_problem(Path(os.path.abspath(folder))) or _ancestor_problem(Path(os.path.realpath(nearest)),
                                                                                owned=True)
    if problem is None:
        return None
    return UntrustedPathError(f"refusing the output folder {folder}: {problem}; another local user could "
                              f"swap it. Use --out with a folder of yours that only you can write")


def _plant_refusal(folder: Path) -> UntrustedPathError | None:
    """Why another user could plant or swap files in the existing `folder` (None: they could not)."""
    problem = output_folder_problem(folder)
    if problem is None:
        return None
    return UntrustedPathError(f"refusing the output folder {folder}: {problem}; another local user could "
                              f"plant or swap the files written there. Use --out with a folder of yours "
                              f"that only you can write")


def _checked_missing(folder: Path) -> list[Path]:
    """The folders `folder` still needs (deepest first), once it is known that another user could
    neither swap them as they are made nor plant files in `folder` as it stands."""
    missing, nearest = _missing_parts(folder)
    refusal = _swap_refusal(folder, nearest) if missing else _plant_refusal(folder)
    if refusal is not None:
        raise refusal
    return missing


def check_output_folder(folder: Path | str) -> None:
    """Raise UntrustedPathError where make_output_folder would refuse `folder` as it stands, making
    nothing: a command with several output folders checks them all before it makes any."""
    _checked_missing(Path(folder))


def make_output_folder(folder: Path | str) -> Path:
    """Create `folder` (and missing parents) with the umask's mode, or accept it if it is there;
    then check it (output_folder_problem). Returns it resolved; raises UntrustedPathError with the
    fix, or OSError when it cannot be made."""
    folder = Path(folder)
    missing = _checked_missing(folder)  # nothing is made where another user could swap it
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o755)  # never writable by others, whatever the umask
        except FileExistsError:  # made meanwhile (a concurrent run, or a plant): checked below
            pass
    if missing and (refusal := _plant_refusal(folder)) is not None:
        raise refusal
    return Path(os.path.realpath(folder))


def open_new_file(path: Path | str, mode: int = 0o644) -> int:
    """A file descriptor for writing a new file at `path`: never through a link, never an existing
    file (O_EXCL | O_NOFOLLOW). FileExistsError when the name is taken."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
