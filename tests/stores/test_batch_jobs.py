"""The batch-job record: intents, job names and ends folded into live and ended jobs; one collector at a time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tasks.core.errors import StoreUnavailable
from tasks.stores.batch_jobs import FILE_NAME, BatchJobs, display_name, workdir_prefix


def test_a_job_is_live_from_its_intent_until_its_end(workdir):
    jobs = BatchJobs(workdir)
    name = display_name(workdir, ["b" * 64, "a" * 64], 1)
    jobs.intend(name, {"a" * 64: "a.jpg", "b" * 64: "b.jpg"}, 1)
    (record,) = jobs.live()
    assert record.job_name is None and record.assets == {"a" * 64: "a.jpg", "b" * 64: "b.jpg"}
    jobs.submitted(name, "batches/x1")
    assert jobs.live()[0].job_name == "batches/x1" and jobs.find("batches/x1").display_name == name
    jobs.end(name, "succeeded", {"described": 2})
    assert jobs.live() == []
    (record,) = jobs.records()
    assert record.ended == "succeeded" and record.counts == {"described": 2}


def test_the_display_name_depends_only_on_the_workdir_the_assets_and_the_try(workdir, tmp_path):
    from tasks.core.workdir import Workdir

    ids = ["c" * 64, "a" * 64]
    assert display_name(workdir, ids, 1) == display_name(workdir, list(reversed(ids)), 1)
    assert display_name(workdir, ids, 1) != display_name(workdir, ids, 2)
    assert display_name(workdir, ids, 1) != display_name(workdir, ids[:1], 1)
    other = Workdir(tmp_path / "other").prepare()
    assert not display_name(other, ids, 1).startswith(workdir_prefix(workdir))
    assert display_name(workdir, ids, 1).startswith(workdir_prefix(workdir))


def test_ended_tries_count_only_jobs_that_gave_no_answer(workdir):
    jobs = BatchJobs(workdir)
    for n, state in enumerate(["expired", "cancelled", "succeeded", "abandoned", "failed"], 1):
        name = f"job{n}"
        jobs.intend(name, {"a" * 64: "a.jpg"}, n)
        jobs.end(name, state)
    assert jobs.ended_tries() == {"a" * 64: 3}


def test_a_torn_last_line_is_ignored_and_the_next_record_starts_on_its_own_line(workdir):
    jobs = BatchJobs(workdir)
    jobs.intend("one", {"a" * 64: "a.jpg"}, 1)
    with open(workdir.root / FILE_NAME, "a") as fh:
        fh.write('{"event":"submitted","display_name":"one","jo')  # a crash mid-append
    assert jobs.live()[0].job_name is None
    jobs.submitted("one", "batches/x")
    assert jobs.live()[0].job_name == "batches/x"
    assert all(line.startswith("{") for line in (workdir.root / FILE_NAME).read_text().splitlines())


def test_a_second_process_is_turned_away_while_one_collects(workdir):
    jobs = BatchJobs(workdir)
    child = textwrap.dedent(f"""
        from pathlib import Path
        from tasks.core.workdir import Workdir
        from tasks.core.errors import StoreUnavailable
        from tasks.stores.batch_jobs import BatchJobs
        try:
            with BatchJobs(Workdir(Path({str(workdir.root)!r}))).exclusive():
                print("held")
        except StoreUnavailable as exc:
            print("busy:", exc.message)
    """)
    with jobs.exclusive():
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout
    assert out.startswith("busy: another run is collecting and submitting batch jobs")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout
    assert out == "held\n"


def test_an_unwritable_record_is_a_store_error(workdir):
    (workdir.root / FILE_NAME).mkdir()
    with pytest.raises(StoreUnavailable, match="cannot"):
        BatchJobs(workdir).intend("x", {}, 1)
