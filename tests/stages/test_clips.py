import io
import json
import shutil

from PIL import Image

from tasks.images.clip_poster import poster_paths
from tasks.stages.clips import FILE_NAME, check_clips
from tasks.stores.pending import held_back, taken_clips

AGENCIES = ["adobe", "shutterstock", "dreamstime"]


def _with_clips(workdir, clips, *names):
    for name in names:
        shutil.copy(clips[name], workdir.assets / clips[name].name)
    return check_clips(workdir, AGENCIES, 1000, 400)


def test_a_clip_over_adobes_limit_is_held_back_there_with_the_rule_and_its_value(workdir, clips):
    report = _with_clips(workdir, clips, "hd", "long")
    assert report.taken == {"adobe": ["harbour.mp4"]}
    assert report.held_back["adobe"]["tide.mov"] == "61 s is longer than the 60 s maximum"
    assert "no published video rules confirmed" in report.held_back["shutterstock"]["harbour.mp4"]
    assert report.held_back["dreamstime"] == {"harbour.mp4": "container MP4 not taken (takes MOV)",
                                              "tide.mov": "codec h264 not taken (takes mjpeg)"}
    listed = {c["file"]: c for c in json.loads((workdir.reports / FILE_NAME).read_text(encoding="utf-8"))["clips"]}
    assert listed["tide.mov"]["duration_s"] > 60 and listed["harbour.mp4"]["taken_by"] == ["adobe"]


def test_avi_and_mpg_clips_go_where_their_container_is_taken(workdir, tmp_path):
    from tests.fakes.clips import make_clip

    make_clip(workdir.assets / "dusk.avi", fps=25, seconds=6, codec="mpeg4")
    make_clip(workdir.assets / "quay.mpg", fps=25, seconds=6, codec="mpeg2video")
    report = check_clips(workdir, AGENCIES, 1000, 400)
    assert report.taken == {"adobe": ["dusk.avi", "quay.mpg"]}
    assert report.held_back["dreamstime"] == {"dusk.avi": "container AVI not taken (takes MOV)",
                                              "quay.mpg": "container MPG not taken (takes MOV)"}
    assert all(poster_paths(workdir, name)[0].exists() for name in ("dusk.avi", "quay.mpg"))


def test_the_clip_is_its_own_upload_item_and_ledger_status_shows_the_held_back_ones(workdir, clips):
    report = _with_clips(workdir, clips, "hd", "long")
    found = {name: (item, agencies) for name, item, agencies in taken_clips(workdir)}
    item, agencies = found["harbour.mp4"]
    assert (item.name, item.path, item.sha256) == ("harbour.mp4", workdir.assets / "harbour.mp4",
                                                   report.asset_ids["harbour.mp4"])
    assert agencies == {"adobe"} and found["tide.mov"][1] == set()
    assert held_back(workdir)["adobe"] == {"tide.mov": "61 s is longer than the 60 s maximum"}
    (workdir.assets / "harbour.mp4").unlink()
    assert "harbour.mp4" not in {name for name, _, _ in taken_clips(workdir)}


def test_the_poster_is_the_middle_frame_made_once(workdir, clips):
    _with_clips(workdir, clips, "hd")
    poster, thumb = poster_paths(workdir, "harbour.mp4")
    with Image.open(io.BytesIO(poster.read_bytes())) as im:
        assert im.size == (1000, 562)
        red = im.getpixel((500, 280))[0]
    assert abs(red - 80) < 25  # the 5 s clip's third second (colour 2 of 0–4), not its first frame (red 0)
    assert Image.open(thumb).size == (400, 225)
    made = poster.stat().st_mtime_ns
    check_clips(workdir, AGENCIES, 1000, 400)
    assert poster.stat().st_mtime_ns == made


def test_the_report_read_back_after_describe_is_the_check_that_wrote_it(workdir, clips):
    from tasks.stages.clips import clip_assets, read_clips_report

    written = _with_clips(workdir, clips, "hd", "long")
    read = read_clips_report(workdir)
    assert (read.facts, read.asset_ids, read.taken, read.held_back) == (
        written.facts, written.asset_ids, written.taken, written.held_back)
    assert read.signatures == written.signatures
    assert [(a.name, a.asset_id) for a in clip_assets(workdir)] == sorted(written.asset_ids.items())
    (workdir.reports / FILE_NAME).unlink()
    assert read_clips_report(workdir).facts == {} and clip_assets(workdir) == []
