"""What a video clip is: its container, duration, frame size, frame rate, codec, audio and rotation (PyAV).

PyAV is the FFmpeg boundary, as Pillow is the image one (:mod:`tasks.images.inspect`): any error FFmpeg raises
reading a clip becomes one BadInput naming the file and the reason. FFmpeg reads the file in packets, so a clip
is never in memory whole; the probe decodes one frame only (the display matrix, which says the rotation, is
side data of a decoded frame).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import BadInput

#: The containers taken, by extension: the container name the agencies' rules use, and the FFmpeg demuxer that
#: must read the file (MP4 and MOV: FFmpeg's one "mov,mp4,…" demuxer reads both; MPEG program streams: "mpeg").
#: Adobe Stock takes MOV, MPG, MP4 and AVI (tasks/agencies/adobe.toml); a renamed file of another kind is not a clip.
CONTAINERS = {".mp4": ("mp4", "mp4"), ".mov": ("mov", "mp4"), ".avi": ("avi", "avi"), ".mpg": ("mpg", "mpeg"),
              ".mpeg": ("mpg", "mpeg")}


@dataclass(frozen=True)
class ClipFacts:
    """One clip as an agency's rules look at it. ``width``/``height`` as shown (after ``rotation``)."""

    container: str  # "mp4", "mov", "avi" or "mpg" (CONTAINERS: an .mpeg file is "mpg")
    bytes: int
    duration_s: float
    width: int
    height: int
    frame_rate: float
    codec: str  # FFmpeg's codec name: h264, hevc, prores, mpeg4, mjpeg …
    audio: str | None  # the first audio stream's codec, None without sound
    rotation: int  # degrees, from the display matrix (0 when there is none)

    @property
    def frame_size(self) -> str:
        return f"{self.width}×{self.height}"

    def words(self) -> str:
        """The clip as the review form and ``batch-assets`` show it: ``MP4 · 5.0 s · 1920×1080 · 25 fps · h264 ·
        no sound · 0.1 MB`` (``sound aac`` with an audio stream; ``rotated 90°`` when its display matrix turns it)."""
        sound = f"sound {self.audio}" if self.audio else "no sound"
        turned = f" · rotated {self.rotation}°" if self.rotation else ""
        return (f"{self.container.upper()} · {self.duration_s:.1f} s · {self.frame_size} · {self.frame_rate:g} fps · "
                f"{self.codec} · {sound}{turned} · {self.bytes / 1e6:.1f} MB")


def probe_clip(path: Path) -> ClipFacts:
    """The facts of the clip at ``path``; BadInput (naming the file) when FFmpeg cannot read it as a clip."""
    import av  # FFmpeg's libraries load when a clip is read, not with every run (0.14 s to import here)

    name = path.name
    kind, demuxer = CONTAINERS.get(path.suffix.lower(), (path.suffix.lower().lstrip("."), ""))
    try:
        with av.open(str(path), mode="r") as container:
            if demuxer not in container.format.name.split(","):
                raise BadInput(name, f"not an {kind.upper()} clip (FFmpeg reads it as {container.format.name})")
            if not container.streams.video:
                raise BadInput(name, "a clip without a video stream (sound only?)")
            video = container.streams.video[0]
            duration = _duration_s(container, video)
            if duration <= 0:
                raise BadInput(name, "a clip whose duration cannot be read (no frames?)")
            rate = video.average_rate or video.guessed_rate
            audio = container.streams.audio[0].codec_context.name if container.streams.audio else None
            first = next(container.decode(video), None)
            if first is None:
                raise BadInput(name, "a clip with no frame that can be decoded")
            rotation = int(first.rotation or 0)
            width, height = video.codec_context.width, video.codec_context.height
            if demuxer == "mpeg":
                duration = _program_stream_duration_s(container, video, duration)
    except BadInput:
        raise
    except (av.FFmpegError, StopIteration, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(name, f"cannot be read as a video clip ({getattr(exc, 'strerror', None) or exc})") from exc
    if rotation % 180:
        width, height = height, width
    return ClipFacts(container=kind, bytes=path.stat().st_size,
                     duration_s=round(duration, 3), width=width, height=height,
                     frame_rate=round(float(rate), 3) if rate else 0.0, codec=video.codec_context.name,
                     audio=audio, rotation=rotation)


def _program_stream_duration_s(container, video, estimate: float) -> float:
    """An MPEG program stream's duration from its video packets' times: FFmpeg's own figure for it is an estimate
    (a 61.0 s MPEG-2 clip of 1,525 frames at 25 fps read as 60.72 s, a 2 s MPEG-1 one as 1.86 s), and an agency's
    maximum must not be met by a clip that is longer. Only the last seconds are read: the seek lands before them,
    the packets after it are read (not decoded), and the last one's end is the clip's."""
    start = video.start_time or 0
    container.seek(max(0, int((estimate - 5) / video.time_base)) + start, stream=video)
    end = max((packet.pts + (packet.duration or 0) for packet in container.demux(video) if packet.pts is not None),
              default=None)
    return float((end - start) * video.time_base) if end is not None else estimate


def _duration_s(container, video) -> float:
    import av

    if container.duration:
        return container.duration / av.time_base
    if video.duration and video.time_base:
        return float(video.duration * video.time_base)
    return 0.0
