"""Captions cameras write on their own (tasks/images/boilerplate.py, the list in camera_boilerplate.toml)."""

from __future__ import annotations

from tasks.images.boilerplate import is_boilerplate


def test_a_caption_that_is_a_path_on_the_cameras_card_counts_as_none():
    assert is_boilerplate("DCIM\\108GOPRO\\GOPR2137.JPG")  # a GoPro's, as PhotoPrism's test has it
    assert is_boilerplate("dcim\\100media\\dji_0001.jpg   ")  # case and the padding ignored
    assert not is_boilerplate("DCIM\\100GOPRO surf at Peniche")  # words in it: a caption someone wrote
    assert not is_boilerplate("DCIM")  # not a path
    assert not is_boilerplate("Ana's DCIM\\backup")
