"""Generated images from Gemini's image model, as an :data:`~tasks.stages.assets.ImageMaker`.

``generate_content`` with ``response_modalities=["IMAGE"]`` on
``settings.image_model``; the image comes back as inline bytes (PNG as a
rule) and is stored as a JPEG whose EXIF carries the prompt
(``ImageDescription``, as the offline generator does, so the prompt can be
found again) and ``Software`` naming Gemini and the model (the image is
AI-generated: agencies ask contributors to say so).

Failures are the describer's: the same :func:`~tasks.gemini.describer.map_gemini_errors`
boundary and :func:`~tasks.gemini.describer.check_answer` (a refused prompt is
``blocked:<REASON>``; an answer without an image is InvalidOutput).
"""

from __future__ import annotations

from io import BytesIO

from google.genai import types
from PIL import Image

from tasks.images.demo import DemoPrompt
from tasks.core.settings import GeminiSettings
from tasks.gemini.client import check_answer, gemini_client, map_gemini_errors
from tasks.images.pixels import rgb_on_white
from tasks.images.provenance import gemini_software
from tasks.core.errors import InvalidOutput

JPEG_QUALITY = 92


def image_prompt(prompt: DemoPrompt) -> str:
    """What the image model is asked for."""
    return (
        f"{prompt.prompt}. A high-quality stock photograph in landscape orientation. "
        "No text, no watermark, no logos, no brand names, no recognizable people."
    )


def to_jpeg(data: bytes, prompt: str, software: str) -> bytes:
    """``data`` (any image Pillow reads) as an RGB JPEG with ``prompt`` and ``software`` in its EXIF.

    Raises InvalidOutput when ``data`` is not a readable image.
    """
    try:
        with Image.open(BytesIO(data)) as im:
            im.load()
            rgb = rgb_on_white(im)
    except (OSError, ValueError, Image.DecompressionBombError):
        raise InvalidOutput("the image in Gemini's answer cannot be read") from None
    exif = Image.Exif()
    exif[0x010E] = prompt  # ImageDescription
    exif[0x0131] = software  # Software
    buf = BytesIO()
    rgb.save(buf, "JPEG", quality=JPEG_QUALITY, exif=exif)
    return buf.getvalue()


class GeminiImageMaker:
    """``make(prompt, index) -> JPEG bytes`` with Gemini's image model; one request per image.

    Thread-safe. Raises only :mod:`tasks.failures` classes (see
    :mod:`tasks.describers.gemini`). ``index`` does not steer the model; the
    caller uses it for the file name.
    """

    def __init__(self, settings: GeminiSettings, api_key: str) -> None:
        self.model = settings.image_model
        self._api_key = api_key
        self._client = gemini_client(settings, api_key)
        self._config = types.GenerateContentConfig(
            response_modalities=["IMAGE"],
            image_config=types.ImageConfig(aspect_ratio="4:3"),
        )

    def __repr__(self) -> str:  # never show the key
        return f"GeminiImageMaker(model={self.model!r})"

    def __call__(self, prompt: DemoPrompt, index: int) -> bytes:
        with map_gemini_errors(self._api_key):
            response = self._client.models.generate_content(
                model=self.model, contents=[image_prompt(prompt)], config=self._config,
            )
        candidate = check_answer(response)
        for part in candidate.content.parts:  # type: ignore[union-attr]  # check_answer ensured content
            blob = part.inline_data
            if blob is not None and blob.data and (blob.mime_type or "").startswith("image/"):
                return to_jpeg(blob.data, prompt.prompt, gemini_software(self.model))
        raise InvalidOutput("Gemini's answer holds no image")
