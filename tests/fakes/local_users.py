"""A second local user of the machine, for the tests that prove another user reaches nothing of the
contributor's (their server, workdir, keys and passwords).

Run as root (CI does): ``microstock-other`` is made once (a system user with no home and no login) and left.
Elsewhere the tests that need it are skipped, saying why.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess

import pytest

OTHER = "microstock-other"


def other_user() -> str:
    """The second local user, made when absent; the test is skipped where that cannot be done."""
    if os.geteuid() != 0:
        pytest.skip("needs root: it creates a second local user and runs a probe as that user")
    if not (shutil.which("useradd") and shutil.which("runuser")):
        pytest.skip("needs useradd and runuser (util-linux, passwd) to act as a second local user")
    if subprocess.run(["id", "-u", OTHER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                       check=True, capture_output=True)
    return OTHER


def other_uid() -> int:
    return pwd.getpwnam(other_user()).pw_uid


def system_python() -> str:
    """The system's python3 (not the contributor's venv, which the other user need not be able to read)."""
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None:
        pytest.skip("needs a system python3 to run the other user's programs")
    return python


def run_as_other(argv: list[str], *, reading: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """``argv`` run as the other user (``runuser``), from ``/`` unless ``cwd`` is given.

    ``reading=True``: they may also read and search every file (``CAP_DAC_READ_SEARCH``, kept through ``setpriv``),
    and still write only what their own modes allow: how this checkout's own code and venv are run as them
    wherever the checkout is (a CI clone sits in a folder only root may enter, ``mktemp -d``). Never for a test of
    what they can read."""
    kwargs.setdefault("cwd", "/")
    if not reading:
        return subprocess.run(["runuser", "-u", other_user(), "--", *argv], **kwargs)
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv (util-linux) to run this checkout's code as a second local user")
    caps = "+dac_read_search"
    return subprocess.run(["setpriv", f"--reuid={other_user()}", f"--regid={other_user()}", "--init-groups",
                           f"--inh-caps={caps}", f"--ambient-caps={caps}", "--", *argv], **kwargs)


def popen_as_other(argv: list[str], **kwargs) -> subprocess.Popen:
    """``argv`` started as the other user and left running (the caller ends it)."""
    kwargs.setdefault("cwd", "/")
    return subprocess.Popen(["runuser", "-u", other_user(), "--", *argv], **kwargs)
