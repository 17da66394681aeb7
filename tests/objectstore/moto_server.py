"""moto's S3 server with object writes serialised, so conditional writes are atomic as on S3.

moto evaluates ``If-None-Match``/``If-Match`` and then stores the object in two steps without a lock
(``moto/s3/responses.py``); its threaded server could, in principle, let two racing conditional PUTs both
pass the check. Measured without this: 0 double wins in 600 eight-way races, but nothing guarantees it.
S3 itself is linearizable per key, so the emulator is made so too: every PUT/POST/DELETE on a key runs
under one lock (reads are not serialised). If moto's internals move, the server runs unpatched and says
so on stderr.

Usage: ``python -m tests.objectstore.moto_server -H 127.0.0.1 -p PORT`` (the arguments of moto.server).
"""

from __future__ import annotations

import sys
import threading


def _serialise_key_writes() -> None:
    from moto.s3.responses import S3Response

    original = S3Response._key_response
    lock = threading.Lock()

    def _key_response(self, request, full_url):  # type: ignore[no-untyped-def]
        if request.method in ("PUT", "POST", "DELETE"):
            with lock:
                return original(self, request, full_url)
        return original(self, request, full_url)

    S3Response._key_response = _key_response  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    try:
        _serialise_key_writes()
    except (ImportError, AttributeError) as e:
        print(f"moto_server: key writes NOT serialised ({e}); conditional writes may race", file=sys.stderr)
    from moto.server import main as moto_main

    moto_main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
