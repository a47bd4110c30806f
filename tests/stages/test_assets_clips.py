"""Generated clips (issue 38 item 4): ``--clips N`` makes them (the offline generator here; Gemini's clip model
through the real SDK's Interactions client against the test server, end to end:
tests/flows/test_stock_batch_generated_clips.py), once; a clip model the table does not know is refused."""

from __future__ import annotations

import json
import shutil
import subprocess

import av
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.images.demo import DEMO_PROMPTS, DEMO_SOFTWARE, generated_name
from tasks.images.provenance import is_ai_generated, provenance_of
from tasks.stages.assets import clip_maker, generate_clips
from tests.fakes.clips import through_pack
from tests.fakes.gemini import FAKE_KEY, fake_gemini  # noqa: F401  (fixture)

FAST = "[gemini]\nrequests_per_minute = 6000\nrequests_per_day = 0\nclip_poll_s = 0.01\n"
CLIP = generated_name(DEMO_PROMPTS[0], 0, 0, clip=True)


def test_the_offline_generator_makes_a_clip_adobe_takes_once(tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    made = generate_clips(wd.assets, 1, DEMO_PROMPTS, 0, clip_maker(Settings(), None, wd))
    assert [a.name for a in made.assets] == [CLIP]
    _, _, report = through_pack(wd, ["adobe"])
    assert list(report.ready) == [CLIP] and report.not_taken == {} and report.held_back == {}, "Adobe takes it"
    with av.open(str(wd.assets / CLIP)) as clip:  # read back by FFmpeg's own reader
        video = clip.streams.video[0]
        assert (video.codec_context.width, video.codec_context.height, float(video.average_rate)) == (1920, 1080, 24)
        assert float(clip.duration / av.time_base) == pytest.approx(6.0)
    tags = json.loads(subprocess.run([shutil.which("exiftool") or "exiftool", "-j", "-G1", "-ItemList:all",
                                      str(wd.assets / CLIP)], capture_output=True, text=True, check=True).stdout)[0]
    assert (tags["ItemList:Title"], tags["ItemList:Encoder"]) == (DEMO_PROMPTS[0].prompt, DEMO_SOFTWARE), (
        "exiftool reads the prompt and the generator from the clip")
    provenance = provenance_of(wd.assets / CLIP)
    assert (provenance.generator, is_ai_generated(provenance)) == ("offline demo", False)
    written = (wd.assets / CLIP).stat().st_mtime_ns
    again = generate_clips(wd.assets, 1, DEMO_PROMPTS, 0, lambda *a: pytest.fail("made again"))
    assert [a.name for a in again.assets] == [CLIP] and (wd.assets / CLIP).stat().st_mtime_ns == written


def test_a_clip_model_the_table_does_not_know_is_refused_before_anything_runs(fake_gemini, monkeypatch, tmp_path):
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / "microstock.toml").write_text('[gemini]\nclip_model = "veo-3.1-generate-preview"\n')
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    result = CliRunner().invoke(app, ["run", "--clips", "1", "--workdir", str(wd)])
    assert result.exit_code == 2 and "`gemini.clip_model = veo-3.1-generate-preview` is not a clip model" in (
        result.output)
    assert fake_gemini.requests == [] and not (wd / "assets").exists()
