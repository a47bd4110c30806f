"""What the upload-ready JPEG's XMP/IPTC carries of protected names and of other tools' keyword copies (issue 39
item 1, issue 37 item 1), read back with exiftool: the CSV rows' check (``ProtectedNames.keywords_without``) holds
for the embedded keywords too."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.agencies.protected import ProtectedNames
from tasks.core.records import Metadata, Sidecar
from tasks.core.settings import KeywordSettings, PackSettings
from tasks.core.workdir import Workdir
from tasks.images.inspect import ImageRules
from tasks.stages.pack import pack_assets
from tests.fakes import pack_samples as s

RULES = {"adobe": ImageRules("adobe", 2000, 1_000, 1_000_000)}  # small images: the real minimum is tested elsewhere
#: Each tool's own copy of the keywords, as exiftool writes them (its tag names).
COPIES = ["-XMP-lr:HierarchicalSubject=Brands|Nike", "-XMP-digiKam:TagsList=Brands/Nike",
          "-XMP-mediapro:CatalogSets=Brands|Nike", "-XMP-microsoft:LastKeywordXMP=Nike",
          "-XMP-microsoft:LastKeywordIPTC=Nike", "-XMP-mwg-kw:HierarchicalKeywords1=Nike",
          "-XMP-acdsee:Categories=<Categories><Category Assigned=\"1\">Nike</Category></Categories>",
          "-XMP-photoshop:SupplementalCategories=Nike", "-IPTC:SupplementalCategories=Nike",
          "-XMP-dc:Rights=© 2026 Ana Fotógrafa"]


def _exiftool(*args: str) -> str:
    if shutil.which("exiftool") is None:
        pytest.fail("exiftool is not installed: `make test` installs it (Debian's libimage-exiftool-perl)")
    return subprocess.run(["exiftool", *args], capture_output=True, text=True, check=True).stdout


def _pack(tmp_path: Path, keywords: list[str], editorial: bool = False) -> dict[str, object]:
    """Every XMP and IPTC tag exiftool reads in the upload-ready copy of a photo whose own XMP has every copy of
    the keywords, its sidecar's keywords ``keywords`` (as a hand correction left them)."""
    wd = Workdir(tmp_path / "wd").prepare()
    s.jpeg(wd.assets / "shoe.jpg", size=(80, 60))
    _exiftool("-q", "-overwrite_original", *COPIES, str(wd.assets / "shoe.jpg"))
    md = Metadata(title="Red sneaker", description="A red sneaker on white", keywords=keywords, editorial=editorial)
    report = pack_assets(wd, PackSettings(preview_px=64, thumbnail_px=32),
                         [Sidecar(asset_id="0" * 64, name="shoe.jpg", metadata=md)], rules=RULES,
                         names=ProtectedNames.of(KeywordSettings()))
    assert not report.rejected, report.rejected
    tags = json.loads(_exiftool("-j", "-G1", "-a", "-XMP:all", "-IPTC:all", str(report.ready["shoe.jpg"])))[0]
    return {k: v for k, v in tags.items() if k.startswith(("XMP", "IPTC"))}


def test_a_corrected_keyword_naming_a_protected_name_is_not_embedded_nor_any_tools_copy(tmp_path):
    tags = _pack(tmp_path, ["Nike Air", "sneaker", "shoe", "red"])
    assert tags["XMP-dc:Subject"] == tags["IPTC:Keywords"] == ["sneaker", "shoe", "red"]
    assert [k for k, v in tags.items() if "nike" in json.dumps(v).casefold()] == []
    assert tags["XMP-dc:Rights"] == "© 2026 Ana Fotógrafa"  # what the project does not own stays


def test_an_editorial_asset_keeps_its_brand_keyword_embedded_as_in_its_csv_row(tmp_path):
    tags = _pack(tmp_path, ["Nike Air", "store"], editorial=True)
    assert tags["XMP-dc:Subject"] == tags["IPTC:Keywords"] == ["Nike Air", "store"]
    assert "XMP-lr:HierarchicalSubject" not in tags  # the copies go all the same: the keywords were rewritten
