"""The pack stage over a workdir (pack_assets, then finish_batch, as the flow calls them): bad files rejected
alone, repairs, held back per agency, determinism, reruns."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from PIL import Image

import tasks.stages.pack as pack
from tasks.core.records import Metadata, Sidecar
from tasks.core.settings import PackSettings
from tasks.core.workdir import Workdir
from tasks.images.inspect import ImageRules
from tasks.stages.pack import PackedFiles, finish_batch, pack_assets
from tests.fakes import pack_samples as s
from tests.fakes.overlap import lines_of, second_run_meets_the_first


def pack_batch(wd, settings, sidecars, agencies=None, **kwargs):
    """The flow's order: pack every asset, then log, ZIP and report."""
    report = pack_assets(wd, settings, sidecars, agencies, **kwargs)
    return finish_batch(wd, report, s.accepted_everywhere(report))

SETTINGS = PackSettings(preview_px=64, thumbnail_px=32)
#: Tiny stand-ins for the agencies' rules so the images stay small (the real ones are used below).
SMALL_RULES = {
    "adobe": ImageRules("adobe", 2000, 40_000, 1_000_000),
    "vecteezy": ImageRules("vecteezy", 2000, 20_000, 1_000_000),
    "dreamstime": ImageRules("dreamstime", 1000),
}


def sidecar(name: str, title: str = "A red square") -> Sidecar:
    md = Metadata(title=title, description=f"{title}, described for the test",
                  keywords=["red", "square", "test", "colour", "sample"])
    return Sidecar(asset_id="0" * 64, name=name, metadata=md)


def workdir(tmp_path: Path, name: str = "wd") -> Workdir:
    return Workdir(tmp_path / name).prepare()


def run(wd: Workdir, names: list[str], **kwargs) -> pack.PackReport:
    kwargs.setdefault("rules", SMALL_RULES)
    return pack_batch(wd, kwargs.pop("settings", SETTINGS), [sidecar(n) for n in names], **kwargs)


def good_batch(wd: Workdir) -> list[str]:
    a = wd.assets
    s.jpeg(a / "plain.jpg", size=(80, 60), exif=s.camera_exif())
    s.quadrant_jpeg(a / "rotated.jpg", size=(80, 60), orientation=6)
    s.jpeg(a / "cmyk.jpg", size=(80, 60), mode="CMYK", colour=(255, 0, 0, 0), icc=s.cmyk_press_icc())
    s.png(a / "alpha.png", Image.new("RGBA", (80, 60), (0, 0, 0, 0)))
    s.png_rgb16(a / "deep.png", size=(80, 60))
    return ["alpha.png", "cmyk.jpg", "deep.png", "plain.jpg", "rotated.jpg"]


def bad_batch(wd: Workdir) -> dict[str, str]:
    """Every bad kind, with the start of the reason it must be rejected for."""
    a = wd.assets
    (a / "empty.jpg").write_bytes(b"")
    s.truncated_jpeg(a / "cut.jpg", size=(80, 60))
    (a / "notes.jpg").write_text("not a picture at all\n")
    s.bomb_png(a / "bomb.png")
    s.jpeg(a / "tiny.jpg", size=(30, 20))
    Image.new("P", (80, 60)).save(a / "anim.png", "GIF")
    return {
        "empty.jpg": "empty file (0 bytes)",
        "cut.jpg": "truncated or corrupt image data",
        "notes.jpg": "not an image",
        "bomb.png": "decompression bomb refused",
        "tiny.jpg": "too small: 30×20",
        "anim.png": "unsupported format GIF",
        "missing.jpg": "cannot read file",
    }


# --- bad input ---------------------------------------------------------------------------


def test_bad_files_are_rejected_by_name_and_never_stop_the_others(tmp_path, caplog):
    wd = workdir(tmp_path)
    good = good_batch(wd)
    bad = bad_batch(wd)
    report = run(wd, sorted(good + list(bad)))

    assert sorted(report.ready) == good
    assert set(report.rejected) == set(bad)
    for name, reason in bad.items():
        assert report.rejected[name].startswith(reason), (name, report.rejected[name])
        assert not any(p.exists() for p in PackedFiles.of(wd, name).all())
        assert f"rejected {name}: {reason}" in caplog.text  # one clear message naming file and reason
    on_disk = json.loads((wd.reports / "pack.json").read_text())
    assert on_disk["rejected"] == report.rejected and on_disk["packed"] == good
    names = zipfile.ZipFile(report.zip_path).namelist()
    assert not any(Path(n).stem in {Path(b).stem for b in bad} for n in names)
    for agency in SMALL_RULES:
        assert sorted(set(report.ready) - set(report.left_out(agency))) == good


def test_repairable_files_are_repaired(tmp_path):
    wd = workdir(tmp_path)
    report = run(wd, good_batch(wd))
    for name, path in report.ready.items():
        with Image.open(path) as im:
            assert (im.format, im.mode) == ("JPEG", "RGB"), name
            assert s.ORIENTATION not in im.getexif()
    with Image.open(report.ready["rotated.jpg"]) as im:
        assert im.size == (60, 80)
    with Image.open(report.ready["alpha.png"]) as im:
        assert im.getpixel((10, 10)) == (255, 255, 255)
    with Image.open(report.ready["cmyk.jpg"]) as im:
        r, g, b = im.getpixel((10, 10))
        assert r < 30 and 130 < g < 190 and b > 200  # the press profile's cyan, not (0, 255, 255)
    assert report.ready["alpha.png"].name == "alpha.jpg"


def test_file_corrupted_after_ingest_is_rejected_alone(tmp_path):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    run(wd, names)
    data = (wd.assets / "plain.jpg").read_bytes()
    (wd.assets / "plain.jpg").write_bytes(data[: len(data) // 2])  # damaged later in the stream
    report = run(wd, names)
    assert report.rejected == {"plain.jpg": report.rejected["plain.jpg"]}
    assert report.rejected["plain.jpg"].startswith("truncated or corrupt image data")
    assert not PackedFiles.of(wd, "plain.jpg").ready.exists()  # the old good copy is not uploaded either
    assert sorted(report.reused) == sorted(set(names) - {"plain.jpg"})


def test_an_unforeseen_failure_rejects_only_that_file(tmp_path, monkeypatch):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    real = pack.embed_metadata

    def failing(jpeg, title, description, keywords, *, name, **labels):
        if name == "deep.png":
            raise RuntimeError("exiv2 fell over")
        return real(jpeg, title, description, keywords, name=name, **labels)

    monkeypatch.setattr(pack, "embed_metadata", failing)
    report = run(wd, names)
    assert report.rejected == {"deep.png": "could not be packed (RuntimeError: exiv2 fell over)"}
    assert len(report.ready) == len(names) - 1


# --- agencies --------------------------------------------------------------------------------


def test_held_back_per_agency_with_the_rule_at_the_real_limits(tmp_path, caplog):
    wd = workdir(tmp_path)
    s.jpeg(wd.assets / "big.jpg", size=(2400, 1800))     # 4.32 MP: every agency
    s.jpeg(wd.assets / "mid.jpg", size=(2000, 1600))     # 3.2 MP: Dreamstime only
    # the agencies enabled by default (the six others ship disabled; their limits: tests/images/test_inspect.py)
    report = pack_batch(wd, PackSettings(), [sidecar("big.jpg"), sidecar("mid.jpg")],
                        ["adobe", "vecteezy", "dreamstime"])
    rule = "2000×1600 = 3.2 MP is below {}'s minimum of 4 MP"
    assert report.held_back == {"adobe": {"mid.jpg": rule.format("adobe")},
                                "vecteezy": {"mid.jpg": rule.format("vecteezy")}}
    assert sorted(set(report.ready) - set(report.left_out("adobe"))) == ["big.jpg"]
    assert sorted(set(report.ready) - set(report.left_out("dreamstime"))) == ["big.jpg", "mid.jpg"]
    assert report.rejected == {}
    with Image.open(report.ready["mid.jpg"]) as im:
        assert im.size == (2000, 1600)  # never upsampled to reach a minimum
    assert json.loads((wd.reports / "pack.json").read_text())["held_back"] == report.held_back
    assert f"held back from adobe: mid.jpg: {rule.format('adobe')}" in caplog.text


def test_held_back_only_for_the_agencies_in_the_run(tmp_path):
    wd = workdir(tmp_path)
    s.jpeg(wd.assets / "wide.jpg", size=(200, 150))  # 30 000 px: over vecteezy's small-rule maximum
    report = run(wd, ["wide.jpg"], agencies=["adobe", "vecteezy"])
    assert report.held_back == {"vecteezy": {"wide.jpg": "200×150 = 0.0 MP is above vecteezy's maximum of 0.02 MP"}}
    report = run(wd, ["wide.jpg"], agencies=["adobe"])
    assert report.held_back == {}


def test_file_size_rule(tmp_path):
    wd = workdir(tmp_path)
    s.jpeg(wd.assets / "a.jpg", size=(80, 60))
    rules = {**SMALL_RULES, "adobe": ImageRules("adobe", 2000, None, 1000)}
    report = run(wd, ["a.jpg"], rules=rules)
    assert report.held_back["adobe"]["a.jpg"].startswith("file is 0.0 MB, above adobe's maximum of 0.001 MB")


# --- what the ready file carries ------------------------------------------------------------------


def test_ready_file_has_metadata_embedded_and_no_location(tmp_path):
    wd = workdir(tmp_path)
    s.quadrant_jpeg(wd.assets / "q.jpg", size=(80, 60), orientation=1)
    report = run(wd, ["q.jpg"])
    with Image.open(report.ready["q.jpg"]) as im:
        xmp = im.getxmp()["xmpmeta"]["RDF"]["Description"]
        assert xmp["title"]["Alt"]["li"]["text"] == "A red square"
        assert xmp["subject"]["Bag"]["li"] == ["red", "square", "test", "colour", "sample"]
        exif = im.getexif()
        assert exif[s.MAKE] == "Canon" and exif[s.MODEL] == "EOS R5"
        assert exif.get_ifd(s.GPS_IFD) == {}


# --- determinism and reruns ---------------------------------------------------------------------


def _outputs(wd: Workdir) -> dict[str, bytes]:
    return {str(p.relative_to(wd.packs)): p.read_bytes()
            for p in sorted(wd.packs.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def test_packing_twice_gives_identical_bytes_and_zip(tmp_path):
    first, second = workdir(tmp_path, "one"), workdir(tmp_path, "two")
    for wd in (first, second):
        names = good_batch(wd)
        (wd.csv / "adobe.csv").write_text("Filename,Title,Keywords,Category,Releases\n", encoding="utf-8")
    run(first, names, workers=2)
    run(second, names, workers=1)
    assert _outputs(first) == _outputs(second)
    assert "batch.zip" in _outputs(first)


def test_rerun_reuses_current_files_and_keeps_the_zip(tmp_path):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    first = run(wd, names)
    before = _outputs(wd)
    zip_stat = first.zip_path.stat()
    again = run(wd, names)
    assert again.packed_now == [] and again.reused == names
    assert _outputs(wd) == before
    assert first.zip_path.stat().st_ino == zip_stat.st_ino  # not rewritten


def test_changed_metadata_repacks_that_asset_only(tmp_path):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    run(wd, names)
    old_zip = (wd.packs / "batch.zip").read_bytes()
    sidecars = [sidecar(n, "A blue square" if n == "plain.jpg" else "A red square") for n in names]
    report = pack_batch(wd, SETTINGS, sidecars, rules=SMALL_RULES)
    assert report.packed_now == ["plain.jpg"]
    with Image.open(report.ready["plain.jpg"]) as im:
        assert im.getxmp()["xmpmeta"]["RDF"]["Description"]["title"]["Alt"]["li"]["text"] == "A blue square"
    assert (wd.packs / "batch.zip").read_bytes() != old_zip


def test_changed_settings_repack(tmp_path):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    run(wd, names)
    report = run(wd, names, settings=PackSettings(preview_px=72, thumbnail_px=32))
    assert report.packed_now == names
    with Image.open(PackedFiles.of(wd, "plain.jpg").preview) as im:
        assert max(im.size) == 72


def test_assets_gone_from_the_batch_leave_no_files(tmp_path):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    run(wd, names)
    report = run(wd, names[1:])
    assert not any(p.exists() for p in PackedFiles.of(wd, names[0]).all())
    assert names[0] not in report.ready
    assert not any(Path(n).stem == Path(names[0]).stem for n in zipfile.ZipFile(report.zip_path).namelist())


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_damaged_output_is_rewritten(tmp_path, damage):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    run(wd, names)
    before = _outputs(wd)
    thumb = PackedFiles.of(wd, "cmyk.jpg").thumb
    thumb.unlink() if damage == "delete" else thumb.write_bytes(thumb.read_bytes()[:10])
    report = run(wd, names)
    assert report.packed_now == ["cmyk.jpg"]
    assert _outputs(wd) == before


def test_split_use_packs_first_and_zips_the_csvs_written_after(tmp_path):
    wd = workdir(tmp_path)
    names = good_batch(wd)
    report = pack.pack_assets(wd, SETTINGS, [sidecar(n) for n in names], rules=SMALL_RULES)
    assert report.zip_path is None and not (wd.packs / "batch.zip").exists()
    (wd.csv / "dreamstime.csv").write_text("Filename,Image Name\n", encoding="utf-8")  # CSVs from what was packed
    pack.finish_batch(wd, report, s.accepted_everywhere(report))
    with zipfile.ZipFile(report.zip_path) as zf:
        assert zf.read("csv/dreamstime.csv") == b"Filename,Image Name\n"
        assert sorted(n for n in zf.namelist() if n.startswith("ready/")) == sorted(
            f"ready/{pack.ready_name(n)}" for n in names)


# --- a full disk -------------------------------------------------------------------------------


def test_a_full_disk_stops_pack_with_one_line_and_the_rerun_packs_each_asset_once(tmp_path, monkeypatch):
    """A full disk cannot be made here without root (no tmpfs of our own), so ENOSPC is injected where pack
    writes: the upload-ready, preview and thumbnail files (``atomic_write_bytes``) after the first two assets'
    six, then the batch ZIP. The small manifest still fits, as it does when the images filled the disk."""
    import errno

    from tasks.core.errors import StageStopped
    from tasks.core.files import disk_of

    wd = workdir(tmp_path)
    names = good_batch(wd)
    real_write, images_written = pack.atomic_write_bytes, []

    def small_disk(path, data):
        if path.name != "manifest.json":
            if len(images_written) == 6:
                raise OSError(errno.ENOSPC, "No space left on device")
            images_written.append(path)
        real_write(path, data)

    monkeypatch.setattr(pack, "atomic_write_bytes", small_disk)
    with pytest.raises(StageStopped) as stop:
        run(wd, names, workers=1)
    line = stop.value.message
    assert stop.value.kind == "disk_full" and "\n" not in line
    assert line.startswith(f"disk full: {disk_of(wd.packs)} has no room left for {wd.packs}")
    assert "pack stopped with 2 asset(s) packed (kept in packs/manifest.json) and 3 left for the next run" in line
    assert not PackedFiles.of(wd, names[2]).ready.exists()  # the asset the disk filled on left nothing half

    monkeypatch.setattr(pack, "atomic_write_bytes", real_write)  # space freed
    monkeypatch.setattr(pack, "write_zip", lambda target, entries: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    again = pack_assets(wd, SETTINGS, [sidecar(n) for n in names], rules=SMALL_RULES, workers=1)
    assert again.reused == names[:2] and again.packed_now == names[2:]  # each asset packed exactly once
    with pytest.raises(StageStopped) as zip_stop:
        finish_batch(wd, again, s.accepted_everywhere(again))
    assert "the 5 packed asset(s) are kept, the ZIP and reports/pack.json not written" in zip_stop.value.message

    monkeypatch.undo()
    last = run(wd, names, workers=1)
    assert last.packed_now == [] and last.reused == names and last.zip_path.is_file()


def test_two_runs_packing_one_workdir_at_once_pack_each_asset_once(tmp_path, monkeypatch):
    """Two runs reach pack together (threads here: the lock is a per-file ``flock``, which two threads' opens
    contend for as two processes' do). The first holds its first packed asset until the second has found the
    lock held and said it waits; the second then finds every asset current."""
    import threading

    wd = workdir(tmp_path)
    names = good_batch(wd)
    real_pack, packed = pack.pack_asset, []
    first_is_packing, second_waits = threading.Event(), threading.Event()

    def counting(src, *args, **kwargs):
        entry, written = real_pack(src, *args, **kwargs)
        if written:
            packed.append(src.name)
            if len(packed) == 1:  # the first run is packing: the second arrives now
                first_is_packing.set()
                second_waits.wait(30)
        return entry, written

    monkeypatch.setattr(pack, "pack_asset", counting)
    reports = {}

    def one_run(which: str) -> None:
        try:
            reports[which] = run(wd, names, workers=1)
        finally:
            second_waits.set()  # a run that never waited (no lock) must not leave the first one hanging

    with lines_of(pack.__name__, "another run is packing", second_waits) as waiting:
        first_started = second_run_meets_the_first(one_run, first_is_packing, second_waits)
    assert first_started, "the first run reached its first asset"
    assert waiting, "the second run found the lock held and said it waits"
    assert sorted(packed) == names, "each asset packed once"
    assert (reports["first"].packed_now, reports["second"].reused) == (names, names)
    assert reports["first"].reused == reports["second"].packed_now == []
