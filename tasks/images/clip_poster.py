"""A clip's poster frame and thumbnail (JPEG): the frame at the middle of the clip, found by seeking.

The seek lands on the key frame before the middle; only the frames from there to the middle are decoded, never
the whole clip. The frame is turned upright as the clip's display matrix says, and sized like an image's
preview and thumbnail (:func:`tasks.images.ready.fit`).
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path
from typing import NamedTuple

from PIL import Image

from tasks.core.errors import BadInput
from tasks.core.workdir import Workdir
from tasks.images.ready import PREVIEW_QUALITY, fit


def poster_paths(wd: Workdir, clip_name: str) -> tuple[Path, Path]:
    """Where a clip's poster and thumbnail JPEGs are kept: ``packs/clips/<stem>.poster.jpg`` and ``.thumb.jpg``."""
    stem = Path(clip_name).stem
    return wd.packs / "clips" / f"{stem}.poster.jpg", wd.packs / "clips" / f"{stem}.thumb.jpg"


class Poster(NamedTuple):
    poster: bytes
    thumb: bytes


def poster_jpegs(path: Path, poster_px: int, thumbnail_px: int) -> Poster:
    """The poster (long side at most ``poster_px``) and thumbnail JPEGs of the clip at ``path``."""
    import av  # loaded only when a clip is read (tasks.images.clip_probe)

    try:
        with av.open(str(path), mode="r") as container:
            video = container.streams.video[0]
            middle_s = (container.duration or 0) / av.time_base / 2
            container.seek(int(middle_s * av.time_base))  # the key frame at or before the middle
            frame = None
            for frame in container.decode(video):
                if frame.time is None or frame.time >= middle_s - 1e-3:
                    break
            if frame is None:
                raise BadInput(path.name, "no frame to make a poster from")
            picture = frame.to_image()
            rotation = int(frame.rotation or 0)
    except (av.FFmpegError, IndexError) as exc:
        raise BadInput(path.name, f"cannot be read as a video clip ({getattr(exc, 'strerror', None) or exc})") \
            from exc
    if rotation:
        picture = picture.rotate(rotation, expand=True)  # PyAV's rotation is counter-clockwise, as Pillow's
    poster = picture.resize(fit(picture.size, poster_px), Image.Resampling.LANCZOS)
    thumb = poster.resize(fit(poster.size, thumbnail_px), Image.Resampling.LANCZOS)
    return Poster(_jpeg(poster), _jpeg(thumb))


def spaced_frames(path: Path, count: int, max_px: int) -> list[bytes]:
    """``count`` frames of the clip at ``path`` at the middles of as many equal parts (3: at 1/6, the middle — the
    poster's frame — and 5/6), upright, at most ``max_px`` on the long side, as JPEGs: what a describer that takes
    no video is shown of a clip. BadInput (naming the file) when FFmpeg cannot read them."""
    import av

    from tasks.images.clip_signature import frame_at

    pictures = []
    try:
        with av.open(str(path), mode="r") as container:
            video = container.streams.video[0]
            seconds = (container.duration or 0) / av.time_base
            for i in range(count):
                frame = frame_at(container, video, seconds * (2 * i + 1) / (2 * count))
                if frame is None:
                    raise BadInput(path.name, "no frame to show the describer")
                picture = frame.to_image()
                if frame.rotation:
                    picture = picture.rotate(int(frame.rotation), expand=True)
                pictures.append(picture.resize(fit(picture.size, max_px), Image.Resampling.LANCZOS))
    except (av.FFmpegError, IndexError) as exc:
        raise BadInput(path.name, f"cannot be read as a video clip ({getattr(exc, 'strerror', None) or exc})") \
            from exc
    return [_jpeg(p) for p in pictures]


def _jpeg(im: Image.Image) -> bytes:
    out = BytesIO()
    im.convert("RGB").save(out, "JPEG", quality=PREVIEW_QUALITY)
    return out.getvalue()
