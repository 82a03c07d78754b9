"""The data plane as a plain ASGI callable: no framework on a proxied request's path.

`DataPlane` answers `POST` on the proxied endpoints itself (a dict lookup on the path; a
path with the model in it is matched against the few templates after that) and
hands everything else — `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`, unknown paths,
wrong methods, the lifespan — to the app behind it (the proxy's Starlette app; the embedded
gateway's FastAPI one), which keeps the error envelopes (and, embedded, the control plane's
validation and OpenAPI). The request body is read here once, behind the same
`BodyLimitMiddleware` (size cap, idle and total deadlines) the app behind uses.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from leasegate.core.errors import GatewayError
from leasegate.providers import CALLER_PREFIXES, ENDPOINTS, Endpoint, caller_route, path_hint
from leasegate.proxy.forward import ClientGone, forward
from leasegate.proxy.runtime import ProxyRuntime
from leasegate.web.body_limit import BodyLimitMiddleware


class ProxiedEndpoint:
    """The ASGI app of one proxied endpoint (`POST` only; the router checks the method).
    It is served behind `BodyLimitMiddleware` (size cap and body deadlines), whose
    refusals `forward` records like any other."""

    __slots__ = ("endpoint", "model_in_path", "runtime")

    def __init__(self, runtime: ProxyRuntime, endpoint: Endpoint) -> None:
        self.runtime = runtime
        self.endpoint = endpoint
        self.model_in_path = endpoint.model_in_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def body() -> bytes:
            return await _read_body(receive)

        path = scope["path"]
        path_model = self.endpoint.model_of(path) if self.model_in_path else None
        if path_model is None and path != self.endpoint.path:
            # a provider SDK's own path (Azure's deployment, Gemini's v1)
            route = caller_route(path)
            path_model = None if route is None else route.model
        in_flight = self.runtime.in_flight
        admitted = in_flight.enter()
        try:
            app = await forward(
                self.runtime, self.endpoint, scope["headers"], body, path_model, shed=not admitted
            )
            await app(scope, receive, send)
        except ClientGone:
            return  # the caller went away while sending its body; its row is queued
        finally:
            if admitted:
                in_flight.leave()


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        if chunk:
            parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


class DataPlane:
    """ASGI: proxied `POST`s go straight to their endpoint's app; the rest to `rest`.

    With `bypass=False` (tracing on) everything goes through `rest`, which makes each
    request's server span: the same endpoint apps, reached through its router."""

    def __init__(self, runtime: ProxyRuntime, rest: ASGIApp, *, bypass: bool = True) -> None:
        self.runtime = runtime
        self.rest = rest
        self._bypass = bypass
        settings = runtime.settings
        self._bare = {e.path: ProxiedEndpoint(runtime, e) for e in ENDPOINTS}
        limited: dict[str, ASGIApp] = {
            path: BodyLimitMiddleware(
                app,
                max_bytes=settings.max_body_bytes,
                idle_timeout_s=settings.body_idle_timeout_s,
                total_timeout_s=settings.body_total_timeout_s,
            )
            for path, app in self._bare.items()
        }
        self._limited = limited
        self.endpoints = {e.path: limited[e.path] for e in ENDPOINTS if not e.model_in_path}
        """Exact paths (the model in the body)."""
        self.templates = tuple((e, limited[e.path]) for e in ENDPOINTS if e.model_in_path)
        """Paths with the model in them, tried after the exact ones."""

    @property
    def state(self) -> Any:
        """The app's `state` (tests and embedding code reach the runtimes there)."""
        return getattr(self.rest, "state", None)

    def routes(self) -> list[Route]:
        """The same endpoints as framework routes, for the app behind (which has its own
        `BodyLimitMiddleware`): a wrong method there gets the usual 405 envelope. Then the
        providers' own SDK paths (Azure's deployments), and last a 404 naming the path to use
        for a `POST` some SDK sends under another API version (never the 405 a `GET` route of
        the same shape would give)."""
        routes = [Route(path, app, methods=["POST"]) for path, app in self._bare.items()]
        callers = _CallerPaths(self._bare)
        routes += [
            Route(prefix + "{rest:path}", callers, methods=["POST"]) for prefix in CALLER_PREFIXES
        ]
        routes.append(Route("/{version}/models/{rest:path}", _not_served, methods=["POST"]))
        return routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._bypass and scope["type"] == "http" and scope["method"] == "POST":
            path = scope["path"]
            app = self.endpoints.get(path) or self._template(path) or self._caller(path)
            if app is not None:
                await app(scope, receive, send)
                return
        await self.rest(scope, receive, send)

    def _caller(self, path: str) -> ASGIApp | None:
        if not path.startswith(CALLER_PREFIXES):
            return None
        route = caller_route(path)
        return None if route is None else self._limited[route.endpoint.path]

    def _template(self, path: str) -> ASGIApp | None:
        for endpoint, app in self.templates:
            if endpoint.model_of(path) is not None:
                return app
        return None


class _CallerPaths:
    """The providers' own SDK paths as one framework route (the traced app's)."""

    def __init__(self, bare: dict[str, ProxiedEndpoint]) -> None:
        self._bare = bare

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = caller_route(scope["path"])
        if route is None:
            await _not_served(scope, receive, send)
            return
        await self._bare[route.endpoint.path](scope, receive, send)


class _NotServed:
    """A 404 naming the path to use, for a path some provider's SDK sends (ASGI)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hint = path_hint(scope["path"])
        error = GatewayError("not-found", hint or "no such route")
        await JSONResponse(error.envelope(), status_code=error.status)(scope, receive, send)


_not_served = _NotServed()
