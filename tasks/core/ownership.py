"""Whose is this path: a workdir, its configuration and the folders files are copied to are used only when no
other user of the machine can change them.

Whoever can change a workdir's ``microstock.toml`` (an agency spec, the ``--config`` file, the workdir itself, or a
folder above it, where they could put their own workdir in its place) chooses where the contributor's passwords
and files go: their FTP server receives the password. So every name the lookup of such a path passes (symlinks
followed) must belong to the user the command runs as, or to root, and be writable by nobody else; a folder above
it may be writable by others only with the sticky bit (``/tmp``: nobody renames or removes another's entry there).
A group write bit counts only for a group others are in: a user's own private group lets no one else in.
One rule for every command, the read-only ones too (docs/INTERFACE.md, "Whose workdir").
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.workdir import Workdir

#: Linux's own limit on the symlinks of one lookup (ELOOP).
_MAX_LINKS = 40


def check_workdir(root: Path, config: Path | None = None) -> None:
    """ConfigError (one line: :func:`check_ours`) unless the workdir ``root``, its configuration (``config`` when
    given, else its ``microstock.toml``), its ``agencies/`` folder and every spec file in it are this user's
    alone. Made before anything of the workdir is read, and before any key or password is."""
    wd = Workdir(root)
    check_ours(root, "workdir")
    check_ours(wd.config_path(config), "config file")
    check_ours(wd.agencies, "agencies folder")
    if wd.agencies.is_dir():
        for spec in sorted(wd.agencies.glob("*.toml")):
            check_ours(spec, "agency spec")


def check_ours(path: Path, what: str, sends: str = "your passwords") -> None:
    """ConfigError naming ``what``, the path and why (:func:`changeable_by_others`), unless only this user (or
    root) can change what ``path`` names. ``sends``: what its owner could send where they choose (the message's
    words)."""
    found = changeable_by_others(path)
    if found is None:
        return
    given, what_is, mode, name = found
    if mode is None:
        raise ConfigError(f"{what} {given} {what_is}: not using it — it could send {sends} where that user chooses")
    raise ConfigError(f"{what} {given} {what_is} (mode {mode:04o}): not using it — it could send {sends} "
                      f"where any of them chooses; `chmod go-w {name}` if it is yours")


def changeable_by_others(path: Path) -> tuple[Path, str, int | None, Path] | None:
    """None when only this user (or root) can change what ``path`` names: it (when it is there) and every folder
    on the way to it owned by this user or root; it writable by nobody else; a folder above it writable by others
    only when sticky; every symlink on the way owned by this user or root, and where it points checked alike. A
    path not there yet is checked up to the folder it would be made in. Else ``(the absolute path, why in words,
    the mode when the mode is why, the name on the way that is why)``."""
    given = path if path.is_absolute() else Path.cwd() / path  # ``..`` kept: after a symlink it goes elsewhere
    for name, st, last in _names_on_the_way(given):
        why = _unsafe(st, last)
        if why is None:
            continue
        others, mode = why
        if stat.S_ISLNK(st.st_mode):
            where = "is a symlink" if name == given else f"goes through {name}, a symlink"
            what_is = f"{where} {others}"
        elif name == given:
            what_is = f"is {others}"
        else:
            what_is = f"{'points to' if last else 'is inside'} {name}, which is {others}"
        return given, what_is, mode, name
    return None


def _unsafe(st: os.stat_result, last: bool) -> tuple[str, int | None] | None:
    """Why another user can change this name (the words, and its mode when the mode is why), or None."""
    if st.st_uid not in (0, os.geteuid()):
        return f"owned by another user (uid {st.st_uid})", None
    if stat.S_ISLNK(st.st_mode):  # a symlink's own mode means nothing; where it points is checked next
        return None
    others = stat.S_IWOTH | (0 if _private_group(st.st_gid) else stat.S_IWGRP)
    if st.st_mode & others and (last or not st.st_mode & stat.S_ISVTX):
        return "writable by other users", stat.S_IMODE(st.st_mode)
    return None


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is this user's own group (named after them, their primary group, nobody else in it): its
    write bit lets no one else in. Debian and Ubuntu give such a user umask 002 (``USERGROUPS_ENAB``), so every
    folder and file they make is group-writable."""
    try:
        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except KeyError:  # a user or group the system does not name
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def _names_on_the_way(path: Path) -> Iterator[tuple[Path, os.stat_result, bool]]:
    """Every name the lookup of the absolute ``path`` passes, ``/`` first, each with its ``lstat`` and whether it
    is the path itself (the last, every symlink followed); it stops at the first name that is not there (or
    cannot be looked at: using the path fails there anyway)."""
    here, todo, links = Path("/"), list(path.parts[1:]), 0
    yield here, os.lstat(here), not todo
    while todo:
        part = todo.pop(0)
        if part == "..":  # ``here`` never holds a symlink: its parent is the real one
            here = here.parent
            continue
        name = here / part
        try:
            st = os.lstat(name)
        except OSError:
            return
        link = stat.S_ISLNK(st.st_mode)
        yield name, st, not todo and not link
        if not link:
            here = name
            continue
        links += 1
        if links > _MAX_LINKS:
            return
        target = Path(os.readlink(name))
        if target.is_absolute():
            here, target = Path("/"), target.relative_to("/")
        todo = list(target.parts) + todo
