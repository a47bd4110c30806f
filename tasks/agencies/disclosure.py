"""An agency's AI rules (``[ai]`` of its spec) applied to one asset's values, each deterministic.

- :func:`without_terms`: wording the agency forbids for AI-generated content
  (Adobe: "generative AI" in titles; its portal tick is the label) removed.
- :func:`with_note`: the sentence the agency wants in an AI-generated asset's
  description (Dreamstime), within the description's length limit; :func:`description_note`
  chooses a clip's sentence where the agency's says "image".
- :func:`with_category`: the agency's AI category among an AI-generated asset's
  categories (Dreamstime: "AI generated"), and never among another asset's.

:mod:`tasks.agencies.rows` records what each changed as a fix, or a problem.
"""

from __future__ import annotations

from pathlib import Path

from tasks.agencies.spec import AgencySpec
from tasks.agencies.text import clean_cell, remove_terms, shorten
from tasks.core.records import CLIP_EXTENSIONS

#: A description ending in one of these takes the note after a space; otherwise a full stop comes first.
_SENTENCE_END = ".!?…"


def without_terms(text: str, terms: tuple[str, ...]) -> tuple[str, list[str]]:
    """``text`` without ``terms``, and the terms that were found in it. The text is looked at as its cell
    will be (:func:`clean_cell`), so a line break or an invisible character cannot hide a term; a text with
    one comes back cleaned, one without comes back as it was."""
    if not terms:
        return text, []
    clean = clean_cell(text)
    found = [t for t in terms if remove_terms(clean, (t,)) != clean]
    return (remove_terms(clean, terms), found) if found else (text, [])


def with_note(description: str, note: str, max_chars: int | None) -> str | None:
    """``description`` with ``note`` appended (unless it already has it), shortened at a word boundary first
    when both would pass ``max_chars``; None when no boundary leaves room for the note."""
    if note.casefold() in description.casefold():
        return description
    if not description:
        return note if max_chars is None or len(note) <= max_chars else None
    room = None if max_chars is None else max_chars - len(note) - 2  # ". " between them at most
    if room is None or len(description) <= room:
        base = description
    else:
        base = shorten(description, room) if room > 0 else None
    if not base:
        return None
    return f"{base} {note}" if base[-1] in _SENTENCE_END else f"{base}. {note}"


def description_note(spec: AgencySpec, filename: str) -> str:
    """The AI note for the file the agency receives: a clip's ``[video] ai_description_note`` when the spec has one
    (Dreamstime's ``[ai] description_note`` says "This image is …"), else ``[ai] description_note``."""
    clip_note = spec.video.ai_description_note
    return clip_note if clip_note and Path(filename).suffix.lower() in CLIP_EXTENSIONS else spec.ai.description_note


def with_category(ids: list[int], category: int, count: int, ai: bool) -> tuple[list[int], str]:
    """The category ids with ``category`` among them for an AI-generated asset (replacing the last, least
    relevant one when all ``count`` are taken) and without it for any other; and what changed ("" if nothing)."""
    if not ai:
        if category not in ids:
            return ids, ""
        return [i for i in ids if i != category], f"removed category {category}: the asset is not AI-generated"
    if category in ids:
        return ids, ""
    if len(ids) < count:
        return [*ids, category], f"added category {category}: the asset is AI-generated"
    return [*ids[: count - 1], category], (f"category {category} replaced {ids[count - 1]} (the last of {count}): "
                                           "the asset is AI-generated")
