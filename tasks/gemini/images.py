"""Generated images from Gemini's image model, as an :data:`~tasks.stages.assets.ImageMaker`.

``generate_content`` with ``response_modalities=["IMAGE"]`` on
``settings.image_model``; the image comes back as inline bytes (PNG as a
rule) and is stored as a JPEG whose EXIF carries the prompt
(``ImageDescription``, as the offline generator does, so the prompt can be
found again) and ``Software`` naming Gemini and the model (the image is
AI-generated: agencies ask contributors to say so).

Failures are the describer's: the same :func:`~tasks.gemini.client.map_gemini_errors`
boundary and :func:`~tasks.gemini.client.check_answer`, whose table names the
image reasons: ``IMAGE_SAFETY`` / ``IMAGE_PROHIBITED_CONTENT`` are
``blocked:<REASON>``, ``IMAGE_RECITATION`` is ``refused:IMAGE_RECITATION``,
``IMAGE_OTHER`` and ``NO_IMAGE`` are InvalidOutput naming the reason (tried
again); an answer of text only (the model declining in words) is
``refused:TEXT_ONLY`` with the model's words. A whole-run failure (retired
model, refused location, refused request shape) is a StageStopped and stops
generation at once; a model ``models.toml`` marks retired stops it before the
first call. Calls go through the image model's shared limiter: a 429
waits and calls again (not an attempt), within ``gemini.rate_limit_wait_s``.

Each image made logs one line with its tokens (prompt, output, thinking) and
cost (``tasks/gemini/prices.toml``; "cost unknown" when the model has no
confirmed price) to this module's logger (the run's log inside a run).
"""

from __future__ import annotations

import datetime as dt
import logging
from io import BytesIO

from google.genai import types
from PIL import Image

from tasks.core.errors import MODEL, InvalidOutput, PermanentError, StageStopped
from tasks.core.records import Made
from tasks.core.settings import GeminiSettings, GenerateSettings
from tasks.gemini.client import Target, check_answer, gemini_client, map_gemini_errors, usage_of
from tasks.gemini.daybudget import DailyBudget
from tasks.gemini.models import cost_usd, retired_refusal
from tasks.gemini.ratelimit import WaitAllowance, shared_limiter
from tasks.images.demo import DemoPrompt
from tasks.images.pixels import rgb_on_white
from tasks.images.provenance import gemini_software

log = logging.getLogger(__name__)

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

    Thread-safe. Raises only :mod:`tasks.core.errors` classes (see
    :mod:`tasks.gemini.describer`). ``index`` does not steer the model; the
    caller uses it for the file name.
    """

    def __init__(self, settings: GeminiSettings, api_key: str, generate: GenerateSettings = GenerateSettings(),
                 budget: DailyBudget | None = None) -> None:
        self.model = settings.image_model
        self.budget = budget
        self._api_key = api_key
        self._client = gemini_client(settings, api_key)
        self._target = Target("gemini.image_model", settings.image_model, "image", settings.api_version)
        self.limiter = shared_limiter(settings.image_model, settings.requests_per_minute, 1)
        self._waits = WaitAllowance(settings.rate_limit_wait_s)
        self._config = types.GenerateContentConfig(
            response_modalities=["IMAGE"],
            image_config=types.ImageConfig(aspect_ratio=generate.aspect_ratio, image_size=generate.image_size),
        )

    def __repr__(self) -> str:  # never show the key
        return f"GeminiImageMaker(model={self.model!r})"

    def _generate(self, prompt: DemoPrompt) -> types.GenerateContentResponse:
        with map_gemini_errors(self._target, self._api_key):
            return self._client.models.generate_content(
                model=self.model, contents=[image_prompt(prompt)], config=self._config,
            )

    def __call__(self, prompt: DemoPrompt, index: int) -> Made:
        if refusal := retired_refusal("gemini.image_model", self.model):  # the table's word: no paid call
            raise StageStopped(refusal, kind=MODEL)
        if self.budget is not None:
            self.budget.take()  # the day's requests to the image model (quota:daily stops generation)
        response = self.limiter.call(lambda: self._generate(prompt), self._waits)
        usage = usage_of(response)
        cost = cost_usd(self.model, usage, dt.date.today())
        log.info("image %d (%s) by %s: prompt %d · output %d · thinking %d tokens · %s", index, prompt.slug,
                 self.model, usage.prompt_tokens, usage.output_tokens, usage.thought_tokens,
                 "cost unknown (no confirmed price)" if cost is None else f"${cost:.4f}")
        candidate = check_answer(response)
        words = []
        for part in candidate.content.parts:  # type: ignore[union-attr]  # check_answer ensured content
            blob = part.inline_data
            if blob is not None and blob.data and (blob.mime_type or "").startswith("image/"):
                return Made(to_jpeg(blob.data, prompt.prompt, gemini_software(self.model)), usage, cost)
            if part.text:
                words.append(part.text)
        if words:
            said = " ".join(" ".join(words).split())
            raise PermanentError(f"Gemini answered with text instead of an image: {said[:160]}", kind="refused",
                                 code="TEXT_ONLY")
        raise InvalidOutput("Gemini's answer holds no image")
