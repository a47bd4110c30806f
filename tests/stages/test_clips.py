import io
import json
import shutil

from PIL import Image

from tasks.images.clip_poster import poster_paths
from tasks.stages.clips import FILE_NAME
from tasks.stages.csv import csvs_for_packed
from tasks.stages.pack import finish_batch
from tasks.stores.pending import held_back, recorded_uploadable, uploadable
from tests.fakes.clips import remuxed, through_pack

AGENCIES = ["adobe", "shutterstock", "dreamstime"]


def _with_clips(workdir, clips, *names):
    """The session's clips in the workdir with the words their contributor wrote into them (a clip with nothing but
    its file name goes to no agency: tests/stages/test_not_seen.py)."""
    for name in names:
        words = clips[name].stem
        remuxed(clips[name], workdir.assets / clips[name].name,
                {"title": f"The {words} at dusk", "comment": f"The {words} at dusk, filmed from the quay"})
    return through_pack(workdir, AGENCIES)


def test_a_clip_over_adobes_limit_is_held_back_there_with_the_rule_and_its_value(workdir, clips):
    _, _, report = _with_clips(workdir, clips, "hd", "long")
    assert sorted(report.ready) == ["harbour.mp4", "tide.mov"]
    assert report.not_taken["adobe"] == {"tide.mov": "61 s is longer than the 60 s maximum"}
    assert "no published video rules confirmed" in report.not_taken["shutterstock"]["harbour.mp4"]
    assert report.not_taken["dreamstime"] == {"harbour.mp4": "container MP4 not taken (takes MOV)",
                                              "tide.mov": "codec h264 not taken (takes mjpeg)"}
    listed = {c["file"]: c for c in json.loads((workdir.reports / FILE_NAME).read_text(encoding="utf-8"))["clips"]}
    assert listed["tide.mov"]["duration_s"] > 60 and listed["harbour.mp4"]["taken_by"] == ["adobe"]


def test_avi_and_mpg_clips_go_where_their_container_is_taken(workdir, tmp_path):
    from tests.fakes.clips import make_clip

    make_clip(workdir.assets / "dusk.avi", fps=25, seconds=6, codec="mpeg4")
    make_clip(workdir.assets / "quay.mpg", fps=25, seconds=6, codec="mpeg2video")
    _, _, report = through_pack(workdir, AGENCIES)
    assert "dusk.avi" not in report.not_taken.get("adobe", {}) and "quay.mpg" not in report.not_taken.get("adobe", {})
    assert report.not_taken["dreamstime"] == {"dusk.avi": "container AVI not taken (takes MOV)",
                                              "quay.mpg": "container MPG not taken (takes MOV)"}
    assert all(poster_paths(workdir, name)[0].exists() for name in ("dusk.avi", "quay.mpg"))


def test_the_clip_is_its_own_upload_item_and_ledger_status_shows_the_held_back_ones(workdir, clips):
    ctx, _, report = _with_clips(workdir, clips, "hd", "long")
    csvs = csvs_for_packed(ctx, report)
    [item] = uploadable(report, csvs, ["adobe"])["adobe"]
    assert (item.name, item.path, item.sha256) == ("harbour.mp4", workdir.assets / "harbour.mp4",
                                                   report.asset_ids["harbour.mp4"])
    assert uploadable(report, csvs, ["dreamstime"]) == {"dreamstime": []}
    finish_batch(workdir, report, csvs)  # what the run records for the ledger commands
    assert held_back(workdir)["adobe"] == {"tide.mov": "61 s is longer than the 60 s maximum"}
    assert [i.name for i in recorded_uploadable(workdir, ["adobe"])["adobe"]] == ["harbour.mp4"]
    (workdir.assets / "harbour.mp4").unlink()
    assert recorded_uploadable(workdir, ["adobe"]) == {"adobe": []}


def test_the_poster_is_the_middle_frame_made_once(workdir, clips):
    _with_clips(workdir, clips, "hd")
    poster, thumb = poster_paths(workdir, "harbour.mp4")
    with Image.open(io.BytesIO(poster.read_bytes())) as im:
        assert im.size == (1000, 562)
        red = im.getpixel((500, 280))[0]
    assert abs(red - 80) < 25  # the 5 s clip's third second (colour 2 of 0–4), not its first frame (red 0)
    assert Image.open(thumb).size == (400, 225)
    made = poster.stat().st_mtime_ns
    through_pack(workdir, AGENCIES)
    assert poster.stat().st_mtime_ns == made


def test_a_clip_that_cannot_be_probed_is_rejected_before_it_is_described(workdir, clips):
    shutil.copy(clips["hd"], workdir.assets / "harbour.mp4")
    (workdir.assets / "broken.mp4").write_bytes(b"not a video at all")
    _, gathered, report = through_pack(workdir, AGENCIES)
    assert [a.name for a in gathered.assets] == ["harbour.mp4"]
    assert "broken.mp4" in gathered.rejected and not workdir.sidecar("broken.mp4").exists()
    assert list(report.ready) == ["harbour.mp4"]
