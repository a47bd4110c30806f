"""The describer on an OpenAI-compatible endpoint: one Chat Completions call per asset, the picture as an image part.

It asks what the Gemini describer asks (:func:`tasks.gemini.describer.describe_prompt`, the same
:class:`~tasks.gemini.describer.StockAnswer`): the image reduced to 1024 px as a ``data:`` URL (a clip: three
frames evenly spaced, the middle one its poster's), the JSON schema as ``response_format`` (servers that take it
answer by it), and the keys spelled out in the prompt for those that ignore it; the answer is read tolerantly
(:func:`answer_of`: JSON as it is, in a fenced block, or the first object in the text). Its failures are classed
by :mod:`tasks.openai_compat.client`; the stage around it (quota, retries, park, stop) is the one Gemini's goes
through.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import urlsplit

from pydantic import ValidationError

from tasks.core.errors import InvalidOutput, OutputTruncated
from tasks.core.records import Asset, Metadata, Usage
from tasks.core.settings import DescriberSettings
from tasks.gemini.describer import (
    SEND_MAX_PX,
    StockAnswer,
    describe_prompt,
    distinct_note,
    image_for_model,
    unique_words,
)
from tasks.gemini.ratelimit import shared_limiter
from tasks.images.clip_poster import spaced_frames
from tasks.openai_compat.client import chat_client, map_openai_errors

#: For servers that ignore ``response_format``: the answer's keys, said in words.
ANSWER_KEYS = ("\nAnswer with one JSON object and nothing else, with the keys title, description, keywords (a list), "
               "adobe_category (a number), category_hints (a list), dreamstime_hints (a list).")
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
#: A clip is shown as this many frames evenly spaced (the middle one its poster's), each at most this long side.
CLIP_FRAMES = 3
CLIP_FRAME_PX = 768
#: Hosts whose tokens cost nothing: the machine's own server.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def response_format() -> dict:
    """The JSON schema of :class:`StockAnswer` as Chat Completions' ``response_format`` (not strict: servers
    differ in what strict mode takes)."""
    return {"type": "json_schema", "json_schema": {"name": "stock_answer", "schema": StockAnswer.model_json_schema()}}


def answer_of(text: str | None) -> StockAnswer:
    """The :class:`StockAnswer` in a reply's text: JSON as it is, else in a fenced block, else the first ``{`` to
    the last ``}``; InvalidOutput naming what is wrong otherwise."""
    text = (text or "").strip()
    if not text:
        raise InvalidOutput("the model's answer has no text")
    fenced = _FENCED.search(text)
    candidates = [text] + ([fenced.group(1)] if fenced else []) + [text[text.find("{"):text.rfind("}") + 1]]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        try:
            answer = StockAnswer.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "answer"
            raise InvalidOutput(f"the model's answer does not fit the schema ({where}: {first['msg']})") from None
        if not any(k.strip() for k in answer.keywords):
            raise InvalidOutput("the model's answer does not fit the schema (keywords: all empty)")
        return answer
    raise InvalidOutput("the model's answer holds no JSON object")


def price_of(settings: DescriberSettings, usage: Usage) -> float | None:
    """USD of ``usage`` at the configured prices; 0 on the machine's own server; None when unknown."""
    if settings.usd_per_million_input is not None and settings.usd_per_million_output is not None:
        return (usage.prompt_tokens * settings.usd_per_million_input
                + usage.output_tokens * settings.usd_per_million_output) / 1e6
    return 0.0 if urlsplit(settings.base_url).hostname in LOCAL_HOSTS else None


class OpenAIDescriber:
    """Metadata from a model behind an OpenAI-compatible endpoint. Thread-safe (one client); raises only
    :mod:`tasks.core.errors` classes (BadInput when the picture cannot be read: no request is made then)."""

    #: Not Gemini's: no daily request budget of Gemini's free tier, no Prefect server's shared Gemini quota.
    gemini_quota = False

    def __init__(self, settings: DescriberSettings, api_key: str | None, language: str = "en",
                 avoid: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.name = f"openai:{settings.model}"
        self.model = settings.model
        self.language = language
        self.limiter = shared_limiter(self.name, settings.requests_per_minute, settings.concurrency)
        self._api_key = api_key
        self._client = chat_client(settings, api_key)
        self._prompts = {False: describe_prompt(language, avoid) + ANSWER_KEYS,
                         True: describe_prompt(language, avoid, clip=True) + f"\nThe clip is attached as {CLIP_FRAMES} "
                         "frames evenly spaced through it, in order." + ANSWER_KEYS}

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIDescriber(model={self.model!r}, base_url={self.settings.base_url!r})"

    def replay_payload(self) -> dict:
        return {"prompt": self._prompts[False], "image_max_px": SEND_MAX_PX, "base_url": self.settings.base_url}

    def set_apart(self, asset: Asset, metadata: Metadata, others: list[Metadata]) -> Metadata:
        """The picture described again, with the others' titles and first keywords to differ from in the prompt."""
        return self.describe(asset, avoid=others)

    def job_over(self, asset: Asset) -> None:
        """Nothing is kept between attempts."""

    def _pictures(self, asset: Asset) -> list[bytes]:
        """The JPEGs sent: the image reduced, or :data:`CLIP_FRAMES` frames of a clip evenly spaced (the middle one
        its poster's), as Chat Completions takes no video. BadInput when unreadable."""
        return spaced_frames(asset.path, CLIP_FRAMES, CLIP_FRAME_PX) if asset.is_clip else [image_for_model(asset)]

    def describe(self, asset: Asset, avoid: list[Metadata] | None = None) -> Metadata:
        pictures = [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,"
                                                        + base64.b64encode(p).decode("ascii")}}
                    for p in self._pictures(asset)]
        prompt = self._prompts[asset.is_clip] + (distinct_note(avoid) if avoid else "")
        with map_openai_errors(self.settings, self._api_key):
            reply = self._client.chat.completions.create(
                model=self.model, response_format=response_format(),  # type: ignore[arg-type]
                messages=[{"role": "user", "content": [{"type": "text", "text": prompt}, *pictures]}])
        if not reply.choices:
            raise InvalidOutput("the model answered without a choice")
        choice = reply.choices[0]
        if choice.finish_reason == "length":
            raise OutputTruncated("the model's answer stopped at its length limit (truncated)", reason="length")
        answer = answer_of(choice.message.content if choice.message else None)
        usage = Usage(prompt_tokens=reply.usage.prompt_tokens, output_tokens=reply.usage.completion_tokens) \
            if reply.usage else Usage()
        return Metadata(
            title=" ".join(answer.title.split()), description=" ".join(answer.description.split()),
            keywords=unique_words(answer.keywords), adobe_category=answer.adobe_category,
            category_hints=unique_words(answer.category_hints + answer.dreamstime_hints), language=self.language,
            describer=self.name, tokens=usage.total, usage=usage, cost_usd=price_of(self.settings, usage))
