"""The browser handler: each question becomes a page on 127.0.0.1, answered in the person's browser.

The page is served from a random loopback port under an unguessable per-question token (``/q/<token>``), with no
external assets: a strict Content-Security-Policy lets nothing load from anywhere, forms post only to the page
itself, and the one inline script carries a per-response nonce. Requests naming another Host are refused (DNS
rebinding).

A form page names the server that asks, marks required fields, pre-fills defaults, uses the browser's native
inputs (email, URL, date, number bounds, radio buttons and checkboxes showing titles), and offers Review, Decline
and Cancel; Review validates with the same validator the server uses and shows either the errors on the form or the
answer to check, with Send and Edit (client/elicitation "User Interaction Model": review before sending, decline and
cancel at any time).

A yes/no question (a form whose only field is a boolean, as ``ctx.confirm`` sends) is one page instead: Yes, No
(focused: Enter answers No), Decline and Cancel; the answer is the reply, with no review.

A URL page (client/elicitation "Safe URL Handling") shows the full URL with its host marked, every warning, and
nothing is fetched; "Open" posts the person's consent and only then redirects a new tab to the URL (no referrer).
The page then offers "I'm done" for the wait that follows.

Concurrent questions are shown one at a time; each page says how many more wait behind it.

The page's small script reports that it is still open. A page the person closes (or navigates away from) becomes
Cancel after a grace period, so the server does not wait for an answer nobody will give; a reload within the grace
period keeps the question. When the question ends elsewhere (the server cancelled it), the page says so. Without
JavaScript everything still works except those two signals.

The parts: ``_handler`` (the web server's lifecycle, routes, and the handler interface), ``_pages`` (a question's
page state and the reports that tell the person left), ``_html`` (the pages and their security headers),
``_forms`` (a posted form read back into values).
"""

from ._handler import BrowserHandler

__all__ = ["BrowserHandler"]
