import pytest

from tasks.agencies.spec import load_spec
from tasks.agencies.video import VideoRules

HD = dict(container="mp4", size=40_000, seconds=5.0, width=1920, height=1080, fps=25.0, codec="h264")


def test_adobe_takes_a_short_landscape_hd_clip():
    assert load_spec("adobe").video.broken_by(**HD) is None


@pytest.mark.parametrize("change, words", [
    (dict(seconds=61.0), "61 s is longer than the 60 s maximum"),
    (dict(seconds=4.0), "4 s is shorter than the 5 s minimum"),
    (dict(width=1080, height=1920), "frame 1080×1920 is vertical"),
    (dict(width=2160, height=2160), "is square"),
    (dict(width=1280, height=720), "narrower than the 1920 px minimum width"),
    (dict(fps=1.0), "1 fps is not a frame rate taken"),
    (dict(codec="hevc"), "codec hevc not taken"),
    (dict(size=4_000_000_000), "4000 MB is over the 3900 MB maximum"),
])
def test_a_clip_breaking_one_of_adobes_rules_is_told_the_rule_and_its_value(change, words):
    assert words in load_spec("adobe").video.broken_by(**{**HD, **change})


def test_23_976_fps_is_the_23_98_adobe_lists():
    assert load_spec("adobe").video.broken_by(**{**HD, "fps": 23.976}) is None


def test_an_agency_without_confirmed_rules_is_sent_no_clip():
    assert "no published video rules confirmed" in load_spec("shutterstock").video.broken_by(**HD)
    assert VideoRules(takes="no").broken_by(**HD) == "does not take video"


def test_an_unknown_key_in_the_video_table_is_refused():
    with pytest.raises(ValueError):
        VideoRules.model_validate({"takes": "taken", "max_length": 60})
