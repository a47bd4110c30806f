from pathlib import Path

import pytest

from tasks.core.errors import BadInput
from tasks.images.clip_probe import probe_clip
from tests.fakes.clips import make_clip


def test_a_clip_is_probed_for_what_agencies_check(clips):
    facts = probe_clip(clips["hd"])
    assert (facts.container, facts.width, facts.height, facts.codec) == ("mp4", 1920, 1080, "h264")
    assert facts.duration_s == pytest.approx(5, abs=0.1)
    assert facts.frame_rate == 25
    assert facts.audio is None and facts.rotation == 0
    assert facts.bytes == clips["hd"].stat().st_size


@pytest.mark.parametrize("name, codec, container", [("dusk.avi", "mpeg4", "avi"), ("dusk.mpg", "mpeg2video", "mpg"),
                                                    ("dusk.mpeg", "mpeg1video", "mpg")])
def test_avi_and_mpeg_clips_are_probed_as_the_containers_adobe_names(tmp_path, name, codec, container):
    facts = probe_clip(make_clip(tmp_path / name, width=640, height=360, seconds=2, fps=25, codec=codec))
    assert (facts.container, facts.codec, facts.width, facts.height) == (container, codec, 640, 360)
    assert facts.duration_s == pytest.approx(2, abs=0.1) and facts.frame_rate == 25


def test_an_mpeg_program_streams_duration_is_read_from_its_packets_not_ffmpegs_estimate(tmp_path):
    """FFmpeg estimates this 61 s clip at 60.4 s: read as that, it would pass a 60 s maximum it breaks."""
    path = make_clip(tmp_path / "tide.mpg", width=320, height=180, seconds=61, fps=5, codec="mpeg2video")
    assert probe_clip(path).duration_s == pytest.approx(61, abs=0.01)


def test_an_mp4_renamed_avi_is_not_taken_for_an_avi(tmp_path):
    renamed = tmp_path / "dusk.avi"
    renamed.write_bytes(make_clip(tmp_path / "dusk.mp4", width=320, height=240, seconds=1).read_bytes())
    with pytest.raises(BadInput) as raised:
        probe_clip(renamed)
    assert raised.value.reason.startswith("not an AVI clip (FFmpeg reads it as mov,mp4")


def test_the_display_matrix_turns_the_frame_size(tmp_path):
    facts = probe_clip(make_clip(tmp_path / "turned.mov", width=320, height=240, seconds=1, rotation=90))
    assert (facts.rotation % 180, facts.width, facts.height) == (90, 240, 320)


@pytest.mark.parametrize("content, reason", [
    (b"\0" * 2000, "cannot be read as a video clip"),
    (b"[ti:lyrics]\n[00:01.00]not a clip\n", "not an MP4 clip"),
])
def test_a_file_that_is_no_clip_is_one_bad_input_naming_it(tmp_path: Path, content, reason):
    path = tmp_path / "broken.mp4"
    path.write_bytes(content)
    with pytest.raises(BadInput) as raised:
        probe_clip(path)
    assert raised.value.path == "broken.mp4" and reason in raised.value.reason
    assert str(tmp_path) not in raised.value.reason
