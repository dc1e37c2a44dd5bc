"""``Context``: what a tool uses to talk to the person at the client during one call."""

from __future__ import annotations

import hashlib
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio
import msgspec

from .._exceptions import ClientCapabilityMissing, ElicitationUnsupported, FieldError, InvalidAnswer
from .._outcomes import Accepted, Cancelled, Declined, Outcome, wire_action
from .._sentences import NO_FORMS, NO_ROOTS, NO_SAMPLING, NO_URL_MODE, OLD_REVISION
from ..forms import Form
from ..protocol import ClientCapabilities, RequestMeta
from ..types import (
    LOGGING_LEVELS,
    REV_2025_06_18,
    Implementation,
    JSONObject,
    JSONValue,
    LoggingLevel,
    RequestId,
    is_stateless,
    supports_url_mode,
)
from ._askers import Asker
from ._url import UrlElicitation

if TYPE_CHECKING:
    from ._dispatch import ServerSession
    from .http._auth import AccessToken

T = TypeVar("T")
_log = logging.getLogger("elicitor.server")
_canonical = msgspec.json.Encoder(order="sorted").encode
_LEVEL_RANK = {level: i for i, level in enumerate(LOGGING_LEVELS)}

current_access_token: ContextVar[AccessToken | None] = ContextVar("elicitor_access_token", default=None)
"""The verified access token of the HTTP request being served (set by ``HttpApp(auth=...)``). Tasks started while
serving a request inherit it: a call's tool sees the token that started the call (2026-07-28) or that opened the
session it runs in (2025-06-18, 2025-11-25), always one issued to ``Context.principal``."""


class Context:
    """The per-call handle a tool receives when it declares a parameter annotated ``Context``.

    Everything here works the same on every protocol revision: on 2025-06-18 and 2025-11-25 questions are sent
    to the client as requests in the middle of the call; on 2026-07-28 the call ends with ``input_required`` and
    is re-run with the answers when the client retries (see :meth:`once` for what that means for side effects).
    """

    __slots__ = (
        "__weakref__", "_asker", "_log_level", "_notify", "_occurrences", "_progress_token", "_session",
        "capabilities", "client", "principal", "request_id", "revision",
    )  # fmt: skip
    # __weakref__: telemetry finds the span of the round serving a 2026-07-28 run by its context (telemetry/_hooks)

    def __init__(
        self,
        session: ServerSession,
        notify: Callable[[str, JSONObject], Awaitable[None]],
        request_id: RequestId,
        revision: str,
        capabilities: ClientCapabilities,
        client: Implementation | None,
        asker: Asker,
        *,
        progress_token: JSONValue = None,
        log_level: LoggingLevel | None = None,
        principal: str | None = None,
    ) -> None:
        self._session = session
        self.principal = principal
        """The user the transport authenticated (``HttpApp(principal=...)``, ``serve(..., principal=...)``), or None."""
        self._notify = notify
        self.request_id = request_id
        """The JSON-RPC id of the request being served."""
        self.revision = revision
        """The protocol revision of this call (you should never need to branch on it)."""
        self.capabilities = capabilities
        """What the client declared for this call."""
        self.client = client
        """The client's self-reported identity, for display and logs only (never for security decisions)."""
        self._asker = asker
        self._progress_token = progress_token
        self._log_level = log_level
        self._occurrences: dict[str, int] | None = None

    # ---- elicitation ---------------------------------------------------------------------------------------

    def can_elicit(self, mode: str = "form") -> bool:
        """Whether the client declared elicitation in ``mode`` (``"form"`` or ``"url"``) for this call."""
        return mode in self.capabilities.elicitation_modes

    @overload
    async def elicit(self, message: str, form: type[T], *, key: str | None = None) -> Outcome[T]: ...
    @overload
    async def elicit(self, message: str, form: Form[T], *, key: str | None = None) -> Outcome[T]: ...
    @overload
    async def elicit(
        self, message: str, form: Mapping[str, Any], *, key: str | None = None
    ) -> Outcome[dict[str, Any]]: ...
    @overload
    async def elicit(self, message: str, form: object, *, key: str | None = None) -> Outcome[Any]: ...

    async def elicit(self, message: str, form: Any, *, key: str | None = None) -> Outcome[Any]:
        """Ask the person at the client to fill in ``form`` and wait for the outcome.

        Args:
            message: what to ask and why, shown to the person.
            form: a dataclass, TypedDict, pydantic model or msgspec Struct type; a single type (``bool``, ``int``,
                an Enum, a ``Literal[...]``, ``list[SomeEnum]``...); a raw ``requestedSchema`` dict; or a
                :class:`~elicitor.Form`.
            key: the input-request key on 2026-07-28 (default: derived from a digest of the message and form, so
                a changed question is asked again rather than answered with a stale answer).

        Returns:
            ``Accepted(data)`` with the validated answer converted to the form's type, ``Declined()`` or
            ``Cancelled()`` (also when the client did not answer within ``Server(elicitation_timeout=...)``).

        Raises:
            FormDefinitionError: ``form`` is outside the spec's subset or asks for a secret.
            ElicitationUnsupported: the client did not declare form-mode elicitation (or cannot express this
                form at its revision). Never returned as an outcome, so it cannot be mistaken for consent.
            InvalidAnswer: the client accepted with content that does not satisfy the form; ``errors`` says what.
        """
        spec = Form.of(form)
        if not self.can_elicit("form"):
            raise ElicitationUnsupported(str(NO_FORMS), mode="form")
        params: JSONObject = {"message": message, "requestedSchema": spec.schema(self.revision)}
        if self.revision != REV_2025_06_18:
            params = {"mode": "form", **params}
        question = self._key(key or f"elicit-{spec.digest(message)}")
        try:
            raw = await self._asker.ask("elicitation/create", params, question)
        except TimeoutError as exc:
            return _unanswered(exc)
        return _outcome(spec, raw)

    @property
    def access_token(self) -> AccessToken | None:
        """The caller's verified OAuth access token (subject, scopes, claims) when the server checks tokens
        (``HttpApp(auth=...)``), else ``None``. On 2026-07-28 it is the token of the request that started the call;
        on the handshake revisions, of the request that opened the session (a later, refreshed token of the same
        user does not replace it). Its ``subject`` is :attr:`principal`."""
        return current_access_token.get()

    async def elicit_url(self, message: str, url: str, *, key: str | None = None) -> Outcome[None]:
        """Ask the person to open ``url`` for something that must not pass through the client (URL mode).

        ``{elicitation_id}`` in ``url`` is replaced by the elicitation's id, so the page can tell which one it
        completes. ``Accepted`` means only that the person agreed to open the URL: the interaction itself happens
        out of band (check its result yourself, e.g. whether the account is now connected).

        Raises:
            ElicitationUnsupported: the client did not declare URL mode, or speaks 2025-06-18 (no URL mode).
            UnsafeUrl: the URL is not absolute http(s), carries credentials, or is plain http off loopback.
        """
        base = key or _url_key(message, url)
        elicitation = await self._register_url(message, url, base)
        try:
            raw = await self._asker.ask("elicitation/create", self._url_params(elicitation), self._key(base))
        except TimeoutError as exc:
            return _unanswered(exc)
        return _outcome(None, raw)

    async def url_elicitation(self, message: str, url: str, *, key: str | None = None) -> UrlElicitation:
        """Register a URL-mode elicitation bound to this client and user, without asking yet.

        Use it to ``raise UrlElicitationRequired(...)``, or to learn its id first. Completing it later (from the
        route the third party calls back) is ``server.complete_url_elicitation(elicitation.id, principal=...)``.

        Raises:
            ElicitationUnsupported: the client did not declare URL mode, or speaks 2025-06-18.
            UnsafeUrl: the URL breaks the safe-URL rules.
        """
        return await self._register_url(message, url, key or _url_key(message, url))

    async def _register_url(self, message: str, url: str, base: str) -> UrlElicitation:
        if not self.can_elicit("url") or not supports_url_mode(self.revision):
            reason = NO_URL_MODE if supports_url_mode(self.revision) else OLD_REVISION
            raise ElicitationUnsupported(str(reason), mode="url")
        known = None
        if is_stateless(self.revision) or self._asker.journal is not None:
            # No ids on the 2026-07-28 wire: keep the same one across rounds so the page's link stays valid. A call
            # kept under its idempotency key keeps it in its record: its retry on a new session (its replica gone)
            # finds the page the person was shown, finished or not, instead of showing another.
            known = await self._kept(f"url-id:{base}", secrets.token_urlsafe(24))
        registry = self._session.server.url_elicitations
        stateless = is_stateless(self.revision)
        return await registry.new(
            message, url, principal=self.principal, elicitation_id=known,
            connection=None if stateless else self._session.id, question=None if stateless else base,
            allow_http=self._session.server.allow_http_urls,
        )  # fmt: skip

    async def wait_for_url_elicitations(
        self, elicitations: Sequence[UrlElicitation], *, attempt: int = 1
    ) -> list[UrlElicitation]:
        """2026-07-28: ask for every URL elicitation in one round; return those the person did not accept.

        ``attempt`` numbers the rounds of one call, so that asking again (the interaction is not complete yet)
        is a new question rather than a replay of the answer already recorded.
        """
        refused: list[UrlElicitation] = []

        async def one(elicitation: UrlElicitation) -> None:
            key = self._key(f"{attempt}:{_url_key(elicitation.message, elicitation.url)}")
            answer = await self._asker.ask("elicitation/create", self._url_params(elicitation), key)
            if answer.get("action") != "accept":
                refused.append(elicitation)

        async with anyio.create_task_group() as tg:
            for elicitation in elicitations:
                tg.start_soon(one, elicitation)
        return refused

    def _url_params(self, elicitation: UrlElicitation) -> JSONObject:
        if is_stateless(self.revision):
            return {"mode": "url", "message": elicitation.message, "url": elicitation.url}
        return elicitation.to_wire()

    async def confirm(self, message: str) -> bool:
        """Ask a yes/no question; **fail-closed**: ``True`` only when the person accepts with "yes".

        Declining, cancelling, answering "no", a client that cannot elicit, or an invalid answer all give
        ``False``, so a destructive action guarded by ``if await ctx.confirm(...)`` never runs by accident.
        """
        try:
            outcome = await self.elicit(message, _CONFIRM_FORM)
        except (ElicitationUnsupported, InvalidAnswer):
            return False
        return isinstance(outcome, Accepted) and outcome.data.get("confirm") is True

    # ---- sampling and roots: the same path as elicitation -----------------------------------------------------

    async def sample(
        self,
        messages: str | Sequence[JSONObject],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: Sequence[str] | None = None,
        model_preferences: JSONObject | None = None,
        key: str | None = None,
    ) -> JSONObject:
        """Ask the client's language model for a message (``sampling/createMessage``) and return its result.

        ``messages`` is a prompt string (one user text message) or a list of ``SamplingMessage`` objects. The
        result is the ``CreateMessageResult`` as sent: ``role``, ``content``, ``model``, ``stopReason``.

        Raises:
            ClientCapabilityMissing: the client did not declare ``sampling``.
            TimeoutError: the client did not answer within ``Server(elicitation_timeout=...)`` (handshake revisions).
        """
        if not self.capabilities.sampling:
            raise ClientCapabilityMissing(str(NO_SAMPLING), {"sampling": {}})
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: JSONObject = {"messages": list(messages), "maxTokens": max_tokens}
        optional = {
            "systemPrompt": system_prompt, "temperature": temperature,
            "stopSequences": list(stop_sequences) if stop_sequences is not None else None,
            "modelPreferences": model_preferences,
        }  # fmt: skip
        params.update({k: v for k, v in optional.items() if v is not None})
        digest = hashlib.sha256(_canonical(params)).hexdigest()[:16]
        return await self._asker.ask("sampling/createMessage", params, self._key(key or f"sample-{digest}"))

    async def list_roots(self, *, key: str | None = None) -> list[JSONObject]:
        """The client's roots (``roots/list``): the directories or files it lets the server work in.

        Raises:
            ClientCapabilityMissing: the client did not declare ``roots``.
            TimeoutError: the client did not answer within ``Server(elicitation_timeout=...)`` (handshake revisions).
        """
        if not self.capabilities.roots:
            raise ClientCapabilityMissing(str(NO_ROOTS), {"roots": {}})
        result = await self._asker.ask("roots/list", {}, self._key(key or "roots"))
        roots = result.get("roots")
        return [r for r in roots if isinstance(r, dict)] if isinstance(roots, list) else []

    # ---- replay-safe side effects ------------------------------------------------------------------------------

    async def once(self, name: str, step: Callable[[], Awaitable[T] | T]) -> T:
        """Run ``step`` at most once per call, even though the tool may be re-run, and return its result.

        On 2026-07-28 a tool is re-run from the top on each round, so code before a ``ctx.elicit`` runs again.
        Wrap side effects (charging a card, creating a record) in ``once``: the first run executes ``step`` and
        records its result (which must be JSON-serializable) in the sealed ``requestState``; later runs return
        the recorded result without calling ``step``. On the other revisions the tool runs once anyway and
        ``step`` is simply called.

        In a task the step is recorded in the shared store before it runs and its result after, fenced by the
        run's claim on the task: whatever replicas stall, die or restart (as long as the store keeps its data),
        ``step`` runs at most once per name. A run that a newer run replaced is cancelled here instead of running
        it; a step that an earlier run started and never finished (its replica stopped in the middle) is not run
        again: the call fails with an error saying its outcome is unknown. A step that raises is not recorded.

        Raises:
            TypeError: the result cannot be serialized to JSON.
            JSONRPCError: (tasks) an earlier run started this step and its outcome is unknown.
        """
        memo = self._asker.memo
        if memo is not None and name in memo:
            return memo[name]  # type: ignore[return-value]  # what `step` returned on an earlier run
        journal = self._asker.journal
        if journal is not None:
            known, recorded = await journal.begin(name)
            if known:
                if memo is not None:
                    memo[name] = recorded
                return recorded  # type: ignore[return-value]  # what `step` returned on an earlier run
        try:
            value = step()
            if inspect.isawaitable(value):
                value = await value
        except Exception:
            if journal is not None:
                with anyio.CancelScope(shield=True):
                    await journal.abandon(name)
            raise
        if memo is not None or journal is not None:
            try:
                plain = msgspec.to_builtins(value)
            except TypeError as exc:  # the step ran: in a task its start stays recorded, its outcome unknown
                raise TypeError(f"ctx.once({name!r}): the result must be JSON-serializable: {exc}") from None
            if journal is not None:
                with anyio.CancelScope(shield=True):  # the step ran: its value is recorded even if we are cancelled
                    await journal.commit(name, plain)
            if memo is not None:
                memo[name] = plain
        return value

    async def _kept(self, name: str, value: str) -> str:
        """``value`` kept under ``name`` for every run of this call, as :meth:`once` keeps a step's result, but
        written in one step (``OnceJournal.keep``): making it did nothing outside this process, so there is no
        "started, outcome unknown" for a replica's death to leave behind. The value an earlier run kept wins."""
        memo = self._asker.memo
        if memo is not None and name in memo:
            return str(memo[name])
        journal = self._asker.journal
        kept: JSONValue = value if journal is None else await journal.keep(name, value)
        if memo is not None:
            memo[name] = kept
        return str(kept)

    # ---- notifications ---------------------------------------------------------------------------------------

    async def log(self, level: LoggingLevel, data: JSONValue, *, logger: str | None = None) -> None:
        """Send a log message to the client (``notifications/message``), if it asked for this level.

        On handshake revisions the level set by ``logging/setLevel`` applies; on 2026-07-28 only calls that
        carry ``io.modelcontextprotocol/logLevel`` receive log messages.
        """
        threshold = self._log_level if is_stateless(self.revision) else self._session.log_level
        if threshold is None or _LEVEL_RANK[level] < _LEVEL_RANK[threshold]:
            return
        params: JSONObject = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._notify("notifications/message", params)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` if the client asked for progress on this call (else do nothing)."""
        if self._progress_token is None:
            return
        params: JSONObject = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._notify("notifications/progress", params)

    async def run_as_task(self) -> None:
        """Go on as a task from here (a tool registered with ``task=..., defer_task=True``).

        What the tool asked so far was asked in ordinary rounds; the call now returns a task to the client and the
        rest of the tool runs as that task, replayed from the top with the answers so far (so code before this
        point runs again: wrap side effects in :meth:`once`). In a task already, on earlier revisions, or when
        the client cannot take a task (an ``optional`` task tool), nothing happens and the call goes on as it is.
        """
        become = getattr(self._asker, "become_task", None)
        if become is not None:
            await become()

    # ---- internals -------------------------------------------------------------------------------------------

    def rebind(
        self,
        request_id: RequestId,
        meta: RequestMeta,
        notify: Callable[[str, JSONObject], Awaitable[None]],
        progress_token: JSONValue,
    ) -> None:
        """Serve a later round of the same call: its request id, metadata, stream and progress token apply now."""
        self.request_id = request_id
        self._notify = notify
        self.capabilities = meta.capabilities
        self.client = meta.client_info
        self._progress_token = progress_token
        self._log_level = meta.log_level

    def _key(self, base: str) -> str:
        if self._occurrences is None:
            self._occurrences = {}
        count = self._occurrences.get(base, 0) + 1
        self._occurrences[base] = count
        return base if count == 1 else f"{base}~{count}"


_CONFIRM_FORM: Form[dict[str, Any]] = Form.from_schema(
    {
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
        "required": ["confirm"],
    }
)


def _unanswered(exc: TimeoutError) -> Cancelled:
    """The client let an elicitation's time run out (``elicitation_timeout``): it ends as the spec's cancel, the
    outcome of a request dismissed without a choice (2025-11-25 client/elicitation, "Response Actions")."""
    _log.warning("elicitation cancelled: %s", exc)
    return Cancelled()


def _url_key(message: str, url: str) -> str:
    return "url-" + hashlib.sha256(_canonical([message, url])).hexdigest()[:16]


@overload
def _outcome(form: Form[T], raw: JSONObject) -> Outcome[T]: ...
@overload
def _outcome(form: None, raw: JSONObject) -> Outcome[None]: ...


def _outcome(form: Form[T] | None, raw: JSONObject) -> Outcome[T] | Outcome[None]:
    """An ElicitResult as an outcome: a form's answer parsed into its type; URL mode (no form) carries no data.

    On 2026-07-28 a replayed round reads its answers from the sealed ``requestState``, which only a replica of this
    deployment can have written; they are checked against the form again all the same, on purpose:

    * The state keeps each answer as the client sent it, valid or not (only its action is checked on arrival). An
      invalid one made this ``ctx.elicit`` raise ``InvalidAnswer`` when it came, and the replay must raise it at
      the same point, so that the tool takes the same path (it may catch the error and ask something else).
    * The form in the tool's hand may not be the one the answer was given for: a replica running a newer version
      of the tool, with ``key=`` keeping the question's key, must not hand the tool data its form does not allow.
    * Parsing is also what builds the value of the form's type; each run gets its own, as the first one did.

    Checking depends on nothing but the form and the answer, so a replay gets the outcome the first run got, at
    about a microsecond per answer.
    """
    action = wire_action(raw)
    if action == "accept":
        if form is None:
            return Accepted(None)
        content = raw.get("content")
        return Accepted(form.parse({} if content is None else content))
    if action == "decline":
        return Declined()
    if action == "cancel":
        return Cancelled()
    raise InvalidAnswer([FieldError(None, f"the client answered with an unknown action {raw.get('action')!r}")])
