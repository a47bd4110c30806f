"""The Files API of the fake Gemini server (:mod:`tests.fakes.gemini` routes these paths here).

As google-genai 3.6.1 calls it (``google/genai/files.py``, ``_api_client.py``):

* ``POST /upload/{api_version}/files`` with ``X-Goog-Upload-Protocol: resumable`` and
  ``X-Goog-Upload-Command: start`` (and ``X-Goog-Upload-Header-Content-Length`` / ``-Content-Type``), body
  ``{"file": {...}}``: answered 200 with the ``x-goog-upload-url`` header (the SDK raises KeyError without it);
* ``POST`` to that URL with ``X-Goog-Upload-Command: upload`` (or ``upload, finalize`` on the last chunk),
  ``X-Goog-Upload-Offset`` and up to 8 MB of the file: answered with ``x-goog-upload-status`` ``active``, and
  ``final`` with ``{"file": <resource>}`` after the finalize (the SDK retries a chunk answered without it);
* ``GET /{api_version}/files/{id}`` — the resource; ``DELETE`` the same path — ``{}``, the file is gone.
  An unknown (or deleted) file is the real 403 PERMISSION_DENIED "You do not have permission to access the
  File <id> or it may not exist." (googleapis/python-genai#1218, langgenius/dify-plugin-daemon#192).

A file is ``PROCESSING`` for :attr:`FakeFiles.processing_gets` GETs, then it ends as :attr:`FakeFiles.end_as`
(``ACTIVE``, or ``FAILED`` with an ``error``). A ``generateContent`` naming a file by its URI before it is
ACTIVE gets the real 400 FAILED_PRECONDITION "The File <id> is not in an ACTIVE state and usage is not
allowed." (home-assistant/core#140182); an unknown file the 403 above (:meth:`FakeFiles.refusal`).
Uploaded files cannot be downloaded from the real API: paths ending ``:download`` are not answered here.
Records: :attr:`FakeFiles.calls` (method, path, the file's state answered), :attr:`FakeFiles.files`.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

#: Fields of the ``File`` resource a create may name (REST reference of ``media.upload``).
FILE_FIELDS = frozenset({"name", "displayName", "mimeType", "sizeBytes", "display_name", "mime_type", "size_bytes"})


@dataclass
class FakeFile:
    name: str
    mime_type: str
    declared_bytes: int
    display_name: str = ""
    data: bytearray | None = None
    state: str = "UPLOADING"
    gets: int = 0

    def resource(self, base: str, api_version: str) -> dict:
        body: dict[str, Any] = {"name": self.name, "mimeType": self.mime_type, "sizeBytes": str(len(self.data or b"")),
                                "uri": f"{base}/{api_version}/{self.name}", "state": self.state, "source": "UPLOADED",
                                "createTime": "2026-12-03T10:00:00Z", "expirationTime": "2026-12-05T10:00:00Z"}
        if self.display_name:
            body["displayName"] = self.display_name
        if self.state == "FAILED":
            body["error"] = {"code": 3, "message": "The video could not be processed."}
        return body


class FakeFiles:
    """Upload, get and delete of the fake server's files."""

    def __init__(self, api_version: str, *, base: Callable[[], str], reply_type: type,
                 error: Callable[..., Any]) -> None:
        self.api_version = api_version
        self.files: dict[str, FakeFile] = {}
        #: GETs a new file answers PROCESSING before it ends as :attr:`end_as`.
        self.processing_gets = 1
        self.end_as = "ACTIVE"
        #: (method, path, state answered or the status code)
        self.calls: list[tuple[str, str, str]] = []
        self._ids = itertools.count(1)
        self._uploads: dict[str, FakeFile] = {}
        self._lock = threading.Lock()
        self._base = base
        self._reply = reply_type
        self._error = error

    def _gone(self, file_id: str) -> Any:
        return self._error(403, f"You do not have permission to access the File {file_id} or it may not exist.",
                           status="PERMISSION_DENIED")

    def handle(self, method: str, path: str, req: Any) -> Any:
        """The reply to a Files API path, or None when ``path`` is not one."""
        route = urlsplit(path).path
        if route.endswith(":download"):
            return None
        with self._lock:
            if route == f"/upload/{self.api_version}/files" and method == "POST":
                return self._upload(path, req)
            prefix = f"/{self.api_version}/files/"
            if not route.startswith(prefix) or method not in ("GET", "DELETE"):
                return None
            file_id = route.removeprefix(prefix)
            found = self.files.get(f"files/{file_id}")
            if found is None or found.state == "UPLOADING":
                self.calls.append((method, path, "403"))
                return self._gone(file_id)
            if method == "DELETE":
                del self.files[found.name]
                self.calls.append((method, path, "deleted"))
                return self._reply(body={})
            found.gets += 1
            if found.state == "PROCESSING" and found.gets > self.processing_gets:
                found.state = self.end_as
            self.calls.append((method, path, found.state))
            return self._reply(body=found.resource(self._base(), self.api_version))

    def _upload(self, path: str, req: Any) -> Any:
        upload_id = (parse_qs(urlsplit(path).query).get("upload_id") or [""])[0]
        if not upload_id:
            if req.header("X-Goog-Upload-Protocol") != "resumable" or req.header("X-Goog-Upload-Command") != "start":
                self.calls.append(("POST", path, "400"))
                return self._error(400, "Upload protocol not supported.", status="INVALID_ARGUMENT")
            given = (req.json or {}).get("file") or {}
            unknown = sorted(set(given) - FILE_FIELDS)
            if unknown:
                return self._error(400, f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at 'file': "
                                        "Cannot find field.")
            name = f"files/fake{next(self._ids):06d}"
            self._uploads[name.removeprefix("files/")] = FakeFile(
                name=name, mime_type=req.header("X-Goog-Upload-Header-Content-Type") or "",
                declared_bytes=int(req.header("X-Goog-Upload-Header-Content-Length") or 0),
                display_name=given.get("displayName") or given.get("display_name") or "", data=bytearray())
            self.files[name] = self._uploads[name.removeprefix("files/")]
            self.calls.append(("POST", path, "started"))
            url = f"{self._base()}/upload/{self.api_version}/files?upload_id={name.removeprefix('files/')}"
            return self._reply(body={}, headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"})
        found = self._uploads.get(upload_id)
        command = req.header("X-Goog-Upload-Command") or ""
        if found is None or int(req.header("X-Goog-Upload-Offset") or -1) != len(found.data or b""):
            self.calls.append(("POST", path, "400"))
            return self._error(400, "Invalid upload offset.", status="INVALID_ARGUMENT")
        assert found.data is not None
        found.data += req.raw_body
        if "finalize" not in command:
            self.calls.append(("POST", path, "chunk"))
            return self._reply(body=b"", headers={"x-goog-upload-status": "active"})
        del self._uploads[upload_id]
        found.state = "PROCESSING"
        self.calls.append(("POST", path, "final"))
        return self._reply(body={"file": found.resource(self._base(), self.api_version)},
                           headers={"x-goog-upload-status": "final"})

    def refusal(self, req: Any) -> Any:
        """What the real service answers a ``generateContent`` naming a file that is not ACTIVE; None otherwise."""
        for content in (req.json or {}).get("contents", []):
            for part in content.get("parts", []):
                data = part.get("fileData") or part.get("file_data")
                if not data:
                    continue
                uri = data.get("fileUri") or data.get("file_uri") or ""
                file_id = uri.rsplit("/files/", 1)[-1]
                with self._lock:
                    found = self.files.get(f"files/{file_id}")
                if found is None:
                    return self._gone(file_id)
                if found.state != "ACTIVE":
                    return self._error(400, f"The File {file_id} is not in an ACTIVE state and usage is not "
                                            "allowed.", status="FAILED_PRECONDITION")
        return None
