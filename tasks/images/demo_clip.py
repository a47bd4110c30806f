"""The offline generator's clips (``run --clips N`` without a key): a slow pan across the demo drawing.

1920×1080 at 24 frames a second for 6 seconds, H.264 in MP4 — inside what Adobe takes (from 1920 wide, 5 to
60 seconds, a standard frame rate; tasks/agencies/adobe.toml ``[video]``) — so the demo's clip goes the whole
way. Same inputs, same drawing; the prompt is the container's ``title`` and the MP4 encoding-tool tag (``©too``,
read back as ``encoder``) is :data:`~tasks.images.demo.DEMO_SOFTWARE`, as the demo image's EXIF ``Software``
is (tasks/images/provenance.py reads both). No audio.
"""

from __future__ import annotations

import hashlib
import random
from io import BytesIO

from tasks.images.demo import DEMO_SOFTWARE, DemoPrompt, render_demo_image

WIDTH, HEIGHT, FPS, SECONDS = 1920, 1080, 24, 6
#: The drawing is this much wider than a frame: the pan's whole travel over the clip.
_PAN = 192


def demo_clip_bytes(prompt: DemoPrompt, seed: int, index: int) -> bytes:
    """The MP4 of generated clip ``index``: the drawing of ``prompt`` panned left to right."""
    import av  # FFmpeg's libraries load when a clip is made, not with every run

    rng = random.Random(hashlib.sha256(f"clip:{seed}:{index}:{prompt.prompt}".encode()).digest())
    drawing = render_demo_image(prompt, rng, size=(WIDTH + _PAN, HEIGHT))
    # the drawing converted to YUV 4:2:0 once; each frame is a window of its planes' rows (an even offset, so the
    # half-width colour planes cut at the same place): no colour conversion per frame
    planes = [(bytes(p), p.line_size) for p in av.VideoFrame.from_image(drawing).reformat(format="yuv420p").planes]
    buf = BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        out.metadata.update({"title": prompt.prompt, "encoding_tool": DEMO_SOFTWARE})
        stream = out.add_stream("h264", rate=FPS, options={"crf": "35", "preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        frames = FPS * SECONDS
        for i in range(frames):
            left = _PAN * i // (frames - 1) // 2 * 2
            frame = av.VideoFrame(WIDTH, HEIGHT, "yuv420p")
            for (data, stride), plane, shift in zip(planes, frame.planes, (0, 1, 1), strict=True):
                x, width, rows = left >> shift, WIDTH >> shift, HEIGHT >> shift
                pad = b"\0" * (plane.line_size - width)
                plane.update(b"".join(data[r * stride + x:r * stride + x + width] + pad for r in range(rows)))
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()
