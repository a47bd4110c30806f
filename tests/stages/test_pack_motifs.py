"""Near-duplicates through the whole batch: an agency with a cap gets at most that many versions of a motif."""

from __future__ import annotations

import random

from tasks.core.workdir import Workdir
from tasks.images.demo import DEMO_PROMPTS, render_demo_image
from tests.fakes.ledger import ledger_entries
from tests.images.test_similar import cropped, noisy

SIZE = (2400, 1800)  # 4.3 MP: every shipped agency takes it


def write_versions_and_distinct(folder, versions: int, distinct: bool = True) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    base = render_demo_image(DEMO_PROMPTS[0], random.Random(7), size=SIZE)
    made = [noisy(base, 100 + i) if i % 2 else cropped(base, 0.005 * (i + 1)) for i in range(versions)]
    names = [f"sunset_v{i}.jpg" for i in range(versions)]
    for name, im in zip(names, made):
        im.save(folder / name, quality=90)
    if distinct:
        for i in (2, 3, 6, 7):  # skyline, circles, triangles, towers: other scenes
            render_demo_image(DEMO_PROMPTS[i], random.Random(i), size=SIZE).save(folder / f"other_{i}.jpg", quality=90)
    return names


def test_a_capped_agency_gets_at_most_its_cap_of_one_motif_and_every_distinct_image(prefect_harness, tmp_path):
    from flows.stock_batch import stock_batch

    wd = Workdir(tmp_path / "work").prepare()
    versions = write_versions_and_distinct(tmp_path / "in", 6)
    first = stock_batch(workdir=str(wd.root), source=str(tmp_path / "in"), return_state=True).result()
    sent = {a: {e.filename for e in ledger_entries(wd.ledger) if e.agency == a} for a in ("adobe", "dreamstime")}
    assert len(sent["adobe"] & set(versions)) == 3  # Adobe: three versions of a motif at most
    assert {f"other_{i}.jpg" for i in (2, 3, 6, 7)} <= sent["adobe"]
    assert sent["dreamstime"] >= set(versions)  # no stated cap: every version
    held = first["held_back"]["adobe"]
    assert sorted(held) == versions[3:] and all("versions of one motif (with sunset_v0.jpg)" in r for r in held.values())

    extra = write_versions_and_distinct(tmp_path / "more", 7, distinct=False)[-1:]  # one more version
    second = stock_batch(workdir=str(wd.root), source=str(tmp_path / "more"), return_state=True).result()
    assert second["uploaded_now"]["adobe"] == 0 and second["uploaded_now"]["dreamstime"] == 1
    assert extra[0] in second["held_back"]["adobe"]


def test_upscaling_is_off_by_default_and_when_chosen_enlarges_to_the_largest_minimum_and_says_so(prefect_harness,
                                                                                                  tmp_path):
    from PIL import Image

    from flows.stock_batch import stock_batch

    source = tmp_path / "in"
    source.mkdir()
    render_demo_image(DEMO_PROMPTS[2], random.Random(3), size=(2160, 1620)).save(source / "city.jpg", quality=90)
    wd = Workdir(tmp_path / "work").prepare()  # 3.5 MP: Dreamstime (3 MP) takes it, Adobe (4 MP) does not
    plain = stock_batch(workdir=str(wd.root), source=str(source), agencies=["adobe"], return_state=True).result()
    assert "city.jpg" in plain["rejected"] and plain["upscaled"] == {}  # not described for Adobe alone

    wd.config_file.write_text("[pack]\nupscale_to_minimum = true\n")
    chosen = stock_batch(workdir=str(wd.root), source=str(source), agencies=["adobe"], return_state=True).result()
    assert chosen["uploaded_now"] == {"adobe": 1}
    with Image.open(wd.outbox("adobe") / "city.jpg") as sent:
        assert sent.width * sent.height >= 4_000_000 and abs(sent.width / sent.height - 4 / 3) < 0.01
    assert chosen["upscaled"]["city.jpg"].startswith("2160×1620 → ")
    with Image.open(wd.assets / "city.jpg") as original:
        assert original.size == (2160, 1620)  # the contributor's file is never touched
