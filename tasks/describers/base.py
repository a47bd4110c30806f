"""The describer interface: an image in, a :class:`~tasks.metadata.Metadata` out."""

from __future__ import annotations

from typing import Protocol

from tasks.assets import Asset
from tasks.metadata import Metadata


class Describer(Protocol):
    """Writes stock metadata for one asset."""

    #: Shown in logs and stored in the metadata (``offline``, ``gemini:<model>``).
    name: str

    def describe(self, asset: Asset) -> Metadata:
        """Return metadata for ``asset``.

        Raises only :class:`~tasks.failures.MicrostockError` subclasses, so the
        caller decides retry / park / stop from the class alone:
        TransientError (retry), PermanentError (park), StageStopped (stop
        calling, leave the rest pending), BadInput (reject the file).
        Must be safe to call from several threads at once.
        """
        ...
