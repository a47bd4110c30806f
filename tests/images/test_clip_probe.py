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


def test_the_display_matrix_turns_the_frame_size(tmp_path):
    facts = probe_clip(make_clip(tmp_path / "turned.mov", width=320, height=240, seconds=1, rotation=90))
    assert (facts.rotation % 180, facts.width, facts.height) == (90, 240, 320)


@pytest.mark.parametrize("content, reason", [
    (b"\0" * 2000, "cannot be read as a video clip"),
    (b"[ti:lyrics]\n[00:01.00]not a clip\n", "not an MP4 or MOV clip"),
])
def test_a_file_that_is_no_clip_is_one_bad_input_naming_it(tmp_path: Path, content, reason):
    path = tmp_path / "broken.mp4"
    path.write_bytes(content)
    with pytest.raises(BadInput) as raised:
        probe_clip(path)
    assert raised.value.path == "broken.mp4" and reason in raised.value.reason
    assert str(tmp_path) not in raised.value.reason
