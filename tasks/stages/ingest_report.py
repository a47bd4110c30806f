"""``reports/ingest.json``: every file the assets stage rejected this run, why, and what to do about it.

The run's summary names the first few rejected files and points here for the
rest; ``reports/pack.json`` holds what the pack stage rejected later. Written
each run (a run that rejects nothing leaves an empty list, so an old list never
reads as this run's). Also lists the assets whose upload-ready copy leaves
something of the file out (the other images of a JPEG's MPF index).
"""

from __future__ import annotations

import json

from tasks.core.errors import StageStopped
from tasks.core.files import atomic_write_bytes, cannot_write, disk_full, disk_of
from tasks.core.reports import Gathered
from tasks.core.workdir import Workdir

FILE_NAME = "ingest.json"

#: (words the reason starts with or holds, what the contributor can do), first match wins.
_WHAT_TO_DO = (
    ("the same picture as", "nothing: the picture is already an asset under the other name"),
    ("the same clip as", "nothing: the clip is already an asset under the other name"),
    ("video clip", "play it in a video player; if it plays, re-export it from your editor as MP4 (H.264) or MOV"),
    ("no frame that can be decoded", "re-export the clip from your editor as MP4 (H.264) or MOV"),
    ("too small", "use a larger original, or let the pack stage enlarge it (pack.upscale_to_minimum, "
                  "docs/AGENCIES.md says what agencies think of it)"),
    ("decompression bomb", "check the file: a real photo this large or with such a chunk is rare; reduce or "
                           "re-save it with an image editor if it is one"),
    ("PNG uses an unknown compression method", "re-save it as PNG or JPEG from an image editor"),
    ("its reader is an optional extra", "install the extra it names, then run again (or export it as JPEG)"),
    ("a multi-page TIFF", "save the page you mean as a TIFF or JPEG of its own and put it in the source folder"),
    ("an animated", "export the frame you mean as a JPEG and put it in the source folder"),
    ("unsupported", "export it as JPEG (or PNG) from your editor and put it in the source folder"),
    ("not an image", "nothing if it is no photo; else copy the photo again from its original"),
    ("a symbolic link", "point the link at the photo, or copy the photo itself into the source folder"),
    ("folders inside --source", "move the photos of that folder into the source folder (or ingest it with its "
                                "own --source)"),
    ("cannot be read", "check the file's permissions and the disk, then run again"),
    ("cannot read file", "check the file's permissions and the disk, then run again"),
)
_DEFAULT = "copy the file again from the camera card or its original; a re-save from an image editor may repair it"


def what_to_do(reason: str) -> str:
    """The contributor's next step for a file rejected with ``reason``."""
    return next((advice for words, advice in _WHAT_TO_DO if words in reason), _DEFAULT)


def write_ingest_report(wd: Workdir, gathered: Gathered) -> None:
    """Write ``reports/ingest.json`` for this run's assets stage.

    A full disk (ENOSPC, EDQUOT): nothing written (an old report is left whole, or none), and the run stops with
    one line (StageStopped ``disk_full``): the disk, what was kept, where the rejected files are named instead;
    any other cause (a read-only folder) the same way, naming the file (``unwritable``).
    """
    report = {
        "rejected": [{"file": name, "reason": reason, "what_to_do": what_to_do(reason)}
                     for name, reason in sorted(gathered.rejected.items())],
        "left_out": [{"file": name, "what": what} for name, what in sorted(gathered.left_out.items())],
    }
    path = wd.reports / FILE_NAME
    try:
        atomic_write_bytes(path, json.dumps(report, indent=2, ensure_ascii=False).encode("utf-8"))
    except OSError as exc:
        if not disk_full(exc):
            raise cannot_write(path, exc, f"the assets stage kept its {len(gathered.assets)} asset(s) (the run's "
                                          f"log names the {len(gathered.rejected)} rejected file(s))") from None
        disk = disk_of(path)
        raise StageStopped(f"disk full: {disk} has no room left for {path} ({exc.strerror or exc}); the assets "
                           f"stage kept its {len(gathered.assets)} asset(s), {path.name} not written (the run's log "
                           f"names the {len(gathered.rejected)} rejected file(s)) — free space on {disk} and run "
                           "again", kind="disk_full") from None
