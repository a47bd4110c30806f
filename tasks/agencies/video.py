"""An agency's video rules as data: the ``[video]`` table of its spec file, and the one check of a clip against it.

``takes``: ``taken`` (the agency publishes rules and they are enforced), ``no`` (it says it does not take
video), or ``unconfirmed`` (no published rules could be confirmed: clips are not sent there, and the reason says
so; nothing is guessed). Every limit is optional: a limit the agency does not publish is not checked. Each figure's
source and the date it was read stand in the spec file and in docs/AGENCIES.md ("Video clips").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: How close a clip's frame rate must be to a listed one (23.976 is the 23.98 an agency lists).
FRAME_RATE_TOLERANCE = 0.01


class VideoRules(BaseModel):
    """What the agency takes as a clip (``[video]``); :meth:`broken_by` checks one clip's facts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    takes: Literal["taken", "no", "unconfirmed"] = "unconfirmed"
    min_seconds: float | None = Field(None, gt=0)
    max_seconds: float | None = Field(None, gt=0)
    max_bytes: int | None = Field(None, ge=1)
    #: The frame's width (as shown) at least, and its shorter side at least.
    min_width: int | None = Field(None, ge=1)
    min_short_side: int | None = Field(None, ge=1)
    #: Frame rates taken (frames per second); empty: any.
    frame_rates: tuple[float, ...] = ()
    #: Containers (file extensions, lower case) and FFmpeg codec names taken; empty: any.
    containers: tuple[str, ...] = ()
    codecs: tuple[str, ...] = ()
    #: ``landscape``: a vertical or square clip is held back (Adobe: "avoid vertical or square framing").
    orientation: Literal["any", "landscape"] = "any"
    #: True: the agency's pages confirm clips go the way its images go (its transport, or by hand from
    #: ``outbox/<agency>/`` for a web-only agency) with their rows in its CSV; a clip its rules take gets its row
    #: and is uploaded there. False: checked only, not sent (how clips reach it is not confirmed).
    by_transfer: bool = False
    #: With ``by_transfer = false``: what is not confirmed about how clips reach the agency, in a few words (the
    #: held-back reason names it); empty: "how clips reach <agency>".
    unconfirmed: str = ""
    #: The AI note of a clip's description where the agency's ``[ai] description_note`` names an image
    #: (Dreamstime); empty: the image's note is used for a clip too.
    ai_description_note: str = ""
    #: Where the agency says so (one line; the details are in docs/AGENCIES.md).
    source: str = ""

    def broken_by(self, *, container: str, size: int, seconds: float, width: int, height: int, fps: float,
                  codec: str) -> str | None:
        """The first rule a clip with these facts breaks, with the rule's value and the clip's; None: taken."""
        if self.takes == "no":
            return "does not take video"
        if self.takes == "unconfirmed":
            return "no published video rules confirmed (docs/AGENCIES.md, \"Video clips\"); not sent"
        checks = (
            (self.containers and container not in self.containers,
             lambda: f"container {container.upper()} not taken (takes {', '.join(self.containers).upper()})"),
            (self.codecs and codec not in self.codecs,
             lambda: f"codec {codec} not taken (takes {', '.join(self.codecs)})"),
            (self.max_seconds is not None and seconds > self.max_seconds,
             lambda: f"{seconds:g} s is longer than the {self.max_seconds:g} s maximum"),
            (self.min_seconds is not None and seconds < self.min_seconds,
             lambda: f"{seconds:g} s is shorter than the {self.min_seconds:g} s minimum"),
            (self.max_bytes is not None and size > self.max_bytes,
             lambda: f"{size / 1e6:.0f} MB is over the {self.max_bytes / 1e6:.0f} MB maximum"),
            (self.orientation == "landscape" and width <= height,
             lambda: f"frame {width}×{height} is {'square' if width == height else 'vertical'} "
             "(the agency says to avoid vertical or square framing)"),
            (self.min_width is not None and width < self.min_width,
             lambda: f"frame {width}×{height} is narrower than the {self.min_width} px minimum width"),
            (self.min_short_side is not None and min(width, height) < self.min_short_side,
             lambda: f"frame {width}×{height}: its shorter side is below {self.min_short_side} px"),
            (self.frame_rates and not any(abs(fps - r) <= FRAME_RATE_TOLERANCE for r in self.frame_rates),
             lambda: f"{fps:g} fps is not a frame rate taken ({', '.join(f'{r:g}' for r in self.frame_rates)})"),
        )
        return next((reason() for broken, reason in checks if broken), None)

    def not_sent(self, display_name: str) -> str | None:
        """Why a clip these rules take is still not sent to the agency (its way of taking clips is not
        confirmed); None when it is sent."""
        if self.by_transfer:
            return None
        what = self.unconfirmed or f"how clips reach {display_name} is not confirmed"
        return f"its video rules are met, but {what} (docs/AGENCIES.md, \"Video clips\"); not sent"
