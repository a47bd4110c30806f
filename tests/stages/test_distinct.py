"""Setting alike assets apart: the offline describer gives each a title and first keywords unlike its group's,
the change is kept and shown in the review form, and the next pack embeds it."""

from __future__ import annotations

from pathlib import Path

from tasks.core.records import described_sidecars, read_sidecar
from tasks.core.reports import CsvReport
from tasks.core.settings import Settings
from tasks.core.workdir import Workdir
from tasks.gemini.describer import distinct_note
from tasks.stages.distinct import alike_assets, make_distinct
from tasks.stages.offline_describer import OfflineDescriber
from tasks.stages.review import review_description
from tasks.stores.similar_risks import read_risks
from tests.stages.test_pack_motifs import pack_and_upload
from tests.stages.test_similarity import add_renders


def test_each_alike_asset_gets_its_own_title_and_first_keywords_and_the_next_pack_embeds_them(tmp_path):
    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 5))
    packed, _ = pack_and_upload(wd)
    before = {n: read_sidecar(wd.sidecar(n)).metadata for n in renders}
    assert alike_assets(read_risks(wd)) == renders[1:]

    changed = make_distinct(wd, OfflineDescriber())
    assert sorted(changed) == renders[1:]  # the first of the motif keeps its words
    after = {n: read_sidecar(wd.sidecar(n)).metadata for n in renders}
    titles = [after[n].title for n in renders]
    assert len(set(titles)) == len(renders), titles
    assert len({tuple(after[n].keywords[:10]) for n in renders}) >= 3
    assert all(sorted(after[n].keywords) == sorted(before[n].keywords) for n in renders)  # reordered, none lost
    form = review_description(wd, described_sidecars(wd), packed, CsvReport(), Settings())
    row = next(line for line in form.splitlines() if f"`{renders[2]}`" in line)
    assert f"set apart by offline: title «{before[renders[2]].title}» → «{after[renders[2]].title}»" in row

    report, _ = pack_and_upload(wd)
    assert sorted(report.packed_now) == renders[1:]  # their embedded metadata changed


def test_gemini_is_shown_the_groups_titles_and_first_keywords():
    from tasks.core.records import Metadata

    note = distinct_note([Metadata(title="Sunset over the sea", description="d", keywords=["sunset", "sea"])])
    assert "Sunset over the sea | sunset, sea" in note and "differ from theirs" in note


def test_a_failing_name_keeps_the_record_of_the_assets_already_set_apart(tmp_path):
    import json

    import pytest

    from tasks.core.errors import BadInput

    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 5))
    pack_and_upload(wd)
    before = read_sidecar(wd.sidecar(renders[1])).metadata.title
    with pytest.raises(BadInput, match="no described asset"):
        make_distinct(wd, OfflineDescriber(), [renders[1], "not-an-asset.jpg"])
    changed = read_sidecar(wd.sidecar(renders[1])).metadata.title
    assert changed != before, "the first name was rewritten before the bad one"
    kept = json.loads((wd.reports / "distinct.json").read_text(encoding="utf-8"))
    assert kept[renders[1]]["before"]["title"] == before and kept[renders[1]]["after"]["title"] == changed


class _AllAtOnce(OfflineDescriber):
    """The offline describer, answering only once every process has asked (all have begun before any records)."""

    def __init__(self, barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def set_apart(self, asset, metadata, others):
        self.barrier.wait(10)
        return super().set_apart(asset, metadata, others)


def _set_apart(root: str, name: str, barrier) -> None:
    make_distinct(Workdir(Path(root)), _AllAtOnce(barrier), [name])


def test_processes_setting_assets_apart_at_once_all_keep_their_change(tmp_path):
    """Each of three processes sets one asset apart; all three began before any wrote ``distinct.json``."""
    import json
    import multiprocessing

    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 5))
    pack_and_upload(wd)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_set_apart, args=(str(wd.root), name, barrier)) for name in renders[1:]]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    kept = json.loads((wd.reports / "distinct.json").read_text(encoding="utf-8"))
    assert sorted(kept) == renders[1:]
    for name in renders[1:]:  # each entry is that asset's change, as its sidecar now has it
        assert kept[name]["after"]["title"] == read_sidecar(wd.sidecar(name)).metadata.title


class _Meanwhile(OfflineDescriber):
    """The offline describer, during whose answer (a Gemini call takes seconds) ``meanwhile`` happens."""

    def __init__(self, meanwhile) -> None:
        super().__init__()
        self.meanwhile = meanwhile

    def set_apart(self, asset, metadata, others):
        self.meanwhile(asset.name)
        return super().set_apart(asset, metadata, others)


def test_a_review_decision_made_while_an_asset_is_set_apart_is_kept(tmp_path):
    from tasks.core.records import record_review

    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 3))
    pack_and_upload(wd)
    before = read_sidecar(wd.sidecar(renders[1])).metadata.title
    changed = make_distinct(wd, _Meanwhile(lambda name: record_review(wd.sidecar(name), "rejected", "the form")),
                            [renders[1]])
    now = read_sidecar(wd.sidecar(renders[1]))
    assert now.rejected and now.review.by == "the form"  # the contributor's rejection stands
    assert now.metadata.title != before and changed[renders[1]]["after"]["title"] == now.metadata.title


def test_words_edited_while_an_asset_is_set_apart_are_kept_and_the_new_ones_not_written(tmp_path, caplog):
    from tasks.stages.review import Correction, apply_correction

    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 3))
    pack_and_upload(wd)
    edit = lambda name: apply_correction(wd, name, Correction(file=name, title="My own title"))  # noqa: E731
    changed = make_distinct(wd, _Meanwhile(edit), [renders[1]])
    assert read_sidecar(wd.sidecar(renders[1])).metadata.title == "My own title"
    assert changed == {} and not (wd.reports / "distinct.json").exists()
    assert "changed while it was being set apart" in caplog.text


def test_keywords_the_rules_take_out_while_setting_apart_are_kept_in_removed_keywords_with_why(tmp_path):
    """The contributor's rules changed since describe (a word excluded, a name of their own protected): setting
    apart applies them, and what they take out is in the sidecar's removed_keywords, as describe keeps it."""
    from tasks.core.settings import KeywordSettings

    wd = Workdir(tmp_path / "w").prepare()
    renders = add_renders(wd, range(1, 3))
    pack_and_upload(wd)
    name = renders[1]
    words = read_sidecar(wd.sidecar(name)).metadata.keywords
    excluded, protected = words[0], words[1]
    rules = KeywordSettings(excluded=[excluded], protected_names=[protected])
    assert sorted(make_distinct(wd, OfflineDescriber(), [name], rules)) == [name]
    after = read_sidecar(wd.sidecar(name)).metadata
    assert excluded not in after.keywords and protected not in after.keywords
    assert after.removed_keywords[excluded] == "excluded"
    assert after.removed_keywords[protected].startswith("protected name")
