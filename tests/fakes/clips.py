"""Small real clips made with PyAV (H.264 at a low frame rate and a tiny bitrate): a few kB each."""

from __future__ import annotations

from pathlib import Path

import av
from PIL import Image


def make_clip(path: Path, width: int = 1920, height: int = 1080, seconds: int = 5, fps: int = 1,
              rotation: int = 0, tags: dict[str, str] | None = None, codec: str = "h264") -> Path:
    """Write a ``seconds``-long clip of ``width``×``height`` at ``fps`` (each second a new colour), with the
    container ``tags`` given (``title``, ``comment`` …), in the container its extension names (FFmpeg's guess:
    ``.avi`` AVI, ``.mpg`` an MPEG program stream) and ``codec`` (H.264 at its smallest, or another FFmpeg encoder
    such as ``mpeg4``, ``mpeg2video`` or Motion JPEG ``mjpeg`` at a low bitrate)."""
    with av.open(str(path), "w") as out:
        out.metadata.update(tags or {})
        options = {"crf": "51", "preset": "ultrafast", "tune": "zerolatency"} if codec == "h264" else {}
        stream = out.add_stream(codec, rate=fps, options=options)
        if codec != "h264":
            stream.bit_rate = 100_000
        # Motion JPEG takes full-range YUV only (FFmpeg's mjpeg encoder refuses yuv420p)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuvj420p" if codec == "mjpeg" else "yuv420p"
        if rotation:
            stream.set_display_rotation(rotation)
        colours = [av.VideoFrame.from_image(Image.new("RGB", (width, height), (40 * i, 90, 160))).reformat(
            format=stream.pix_fmt) for i in range(6)]  # six frames converted once, sent again and again
        for i in range(seconds * fps):
            colours[i // fps % 6].pts = None
            for packet in stream.encode(colours[i // fps % 6]):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def remuxed(source: Path, target: Path, tags: dict[str, str] | None = None) -> Path:
    """The same packets in another container (MOV): other bytes, the same decoded frames — a duplicate; with the
    container ``tags`` given (the words a contributor wrote into the clip: ``title``, ``comment``, ``keywords``)."""
    with av.open(str(source)) as src, av.open(str(target), "w") as out:
        out.metadata.update(tags or {})
        stream = out.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    return target


def through_pack(wd, agencies, settings=None):
    """The workdir's assets, every kind, taken the flow's way as far as the pack stage with no Prefect: gathered
    (each checked by its kind), described offline, packed by its kind. Returns (run context, gathered, packed)."""
    from tasks.core.settings import Settings
    from tasks.stages.assets import gather_assets
    from tasks.stages.describe import describe_stage
    from tasks.stages.kinds import pack_described
    from tasks.stages.run_context import RunContext

    ctx = RunContext(wd, settings or Settings(), list(agencies))
    gathered = gather_assets(ctx, 0, None)
    describe_stage(ctx, gathered.assets)
    return ctx, gathered, pack_described(ctx)
