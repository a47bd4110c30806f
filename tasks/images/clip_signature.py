"""A clip's similarity signature: the looks (:mod:`tasks.images.similar`) of a few frames evenly spaced.

:data:`FRAMES` frames, at the middles of as many equal parts of the clip (5: at 10 %, 30 %, 50 %, 70 %, 90 %),
each found by seeking (the key frame before it, then decoding up to it, as the poster does): the clip is read in
packets, never in memory whole, and only a few frames are decoded in full. Each frame is scaled by FFmpeg to
:data:`LOOKS_PX` on its long side and hashed as an image's preview is (two perceptual hashes and a colour
layout), so two clips are compared frame by frame with the images' own scoring
(:func:`tasks.images.likeness.likeness`).

``digest`` is the SHA-256 of those frames' decoded pixels (their planes, with the frame size): two files of one
clip (the same frames in another container, or with other metadata) have the same digest, which is how the
similarity check tells a duplicate from a version. Re-encoding changes the pixels, so a re-encoded copy is a
near-identical version (a similar-content risk), not a duplicate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from tasks.core.errors import BadInput
from tasks.images.similar import Looks, looks

#: Frames a signature is made of.
FRAMES = 5
#: Long side the frames are scaled to before hashing (an image's looks come from its preview, a few hundred px).
LOOKS_PX = 256


@dataclass(frozen=True)
class ClipSignature:
    """The looks of :data:`FRAMES` frames, in time order, and the digest of their decoded pixels."""

    frames: tuple[Looks, ...]
    digest: str

    def as_json(self) -> dict:
        return {"frames": [f.as_manifest() for f in self.frames], "digest": self.digest}

    @classmethod
    def from_json(cls, data: dict) -> "ClipSignature | None":
        """The signature kept by :meth:`as_json`; None when it is of another shape."""
        try:
            frames = tuple(Looks.from_manifest(f) for f in data["frames"])
            digest = data["digest"]
        except (KeyError, TypeError):
            return None
        if not frames or any(f is None for f in frames) or not isinstance(digest, str):
            return None
        return cls(frames, digest)  # type: ignore[arg-type]


def clip_signature(path: Path, frames: int = FRAMES) -> ClipSignature:
    """The signature of the clip at ``path``; BadInput (naming the file) when FFmpeg cannot read its frames."""
    import av  # loaded only when a clip is read (tasks.images.clip_probe)

    found: list[Looks] = []
    pixels = hashlib.sha256()
    try:
        with av.open(str(path), mode="r") as container:
            video = container.streams.video[0]
            seconds = (container.duration or 0) / av.time_base
            if seconds <= 0 and video.duration and video.time_base:
                seconds = float(video.duration * video.time_base)
            for i in range(frames):
                frame = frame_at(container, video, seconds * (2 * i + 1) / (2 * frames))
                if frame is None:
                    raise BadInput(path.name, "no frame to make a similarity signature from")
                _digest_pixels(pixels, frame)
                found.append(looks(_small(frame)))
    except BadInput:
        raise
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise BadInput(path.name, f"cannot be read as a video clip ({getattr(exc, 'strerror', None) or exc})") \
            from exc
    return ClipSignature(tuple(found), pixels.hexdigest())


def frame_at(container, video, at_s: float):
    """The first frame at or after ``at_s`` seconds (the last one when the clip ends before), by seeking."""
    import av

    container.seek(int(at_s * av.time_base))  # the key frame at or before ``at_s``
    frame = None
    for frame in container.decode(video):
        if frame.time is None or frame.time >= at_s - 1e-3:
            break
    return frame


def _digest_pixels(pixels, frame) -> None:
    """Add the frame's decoded pixels (as 8-bit 4:2:0, the visible bytes of each row only: a row's padding is
    not the picture) to ``pixels``."""
    same = frame if frame.format.name == "yuv420p" else frame.reformat(format="yuv420p")
    pixels.update(f"{frame.width}x{frame.height}:".encode())
    for plane in same.planes:
        rows, step, width = memoryview(plane), plane.line_size, plane.width
        for y in range(plane.height):
            pixels.update(rows[y * step:y * step + width])


def _small(frame) -> Image.Image:
    """The frame scaled by FFmpeg to :data:`LOOKS_PX` on its long side, as RGB (the full frame is never copied)."""
    w, h = frame.width, frame.height
    scale = LOOKS_PX / max(w, h)
    return frame.reformat(width=max(1, round(w * scale)), height=max(1, round(h * scale)),
                          format="rgb24").to_image()
