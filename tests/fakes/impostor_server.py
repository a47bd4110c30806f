"""Another local user's fake workdir server keeper (issue 50), run as that user with the system python3 ``-I``.

``python3 -I impostor_server.py LOG tasks.orchestration.server_keeper HOME PORT IDLE_S``: its command line
holds what the contributor's keeper's does, it listens on ``127.0.0.1:PORT`` and answers every request as a
Prefect server would (200, ``/api/health`` true, ``/api/admin/version`` 3.9.1), and writes each request it
receives (method, path, headers) as a JSON line to ``LOG``. Standard library only: the other user cannot read
the contributor's venv.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Answer(BaseHTTPRequestHandler):
    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        with open(sys.argv[1], "a", encoding="utf-8") as log:
            log.write(json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                  "body": body}) + "\n")
        reply = b'"3.9.1"' if self.path.endswith("/admin/version") else b"true" if "health" in self.path else b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def log_message(self, *args) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[4])), Answer).serve_forever()
