"""The contributor's releases of held-back assets (``similar_released.json``)."""

from __future__ import annotations

import threading

from tasks.core.workdir import Workdir
from tasks.stores.similar_risks import record_release, released


def test_releases_made_at_once_are_all_kept(tmp_path):
    """Twenty releases at once (threads: the lock is a per-file ``flock``, which two threads' opens contend
    for as two processes' do): the file is read, added to and rewritten under the lock, so none is lost."""
    wd = Workdir(tmp_path)
    start = threading.Barrier(20)

    def release(i: int) -> None:
        start.wait()
        record_release(wd, "adobe", f"a{i}.jpg", f"{i:064x}")

    threads = [threading.Thread(target=release, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert released(wd) == {("adobe", f"{i:064x}") for i in range(20)}
