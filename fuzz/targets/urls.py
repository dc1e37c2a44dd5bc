"""URL checks on both sides: the server's safe-URL rule and the client's reading of a URL it is asked to open.

Property: :func:`check_url` raises nothing but :class:`UnsafeUrl`; what it accepts is absolute http(s) with a host
and no credentials. :func:`url_warnings` and everything a handler reads from a :class:`UrlElicitationRequest`
(host, the span to highlight, whether it may be opened, the server's label) raise nothing for any URL, message,
elicitation id or server info. Spec: 2025-11-25 client/elicitation ("URL Mode", "Safe URL Handling").
"""

from __future__ import annotations

from urllib.parse import urlsplit

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    from elicitor.client._url import UrlElicitationRequest, url_warnings
    from elicitor.protocol import parse_implementation
    from elicitor.server._url import UnsafeUrl, check_url
    from fuzz.targets._harness import fuzz


def TestOneInput(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    url, _, rest = text.partition("\n")
    for allow_http in (False, True):
        try:
            check_url(url, allow_http=allow_http)
        except UnsafeUrl:
            pass
        else:
            parts = urlsplit(url)
            assert parts.scheme in ("http", "https") and parts.hostname, url
            assert parts.username is None and parts.password is None, url
    assert isinstance(url_warnings(url), list)
    server = parse_implementation({"name": rest[:40], "version": rest[40:50], "title": rest[50:]})
    request = UrlElicitationRequest.from_params({"message": rest, "url": url, "elicitationId": rest}, server)
    span = request.host_span
    assert span is None or 0 <= span[0] <= span[1] <= len(url), (url, span)
    assert isinstance(request.host, str) and isinstance(request.openable, bool)
    assert isinstance(request.server_label, str)


if __name__ == "__main__":
    fuzz(TestOneInput)
