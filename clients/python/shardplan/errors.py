"""Exceptions raised by the shardplan client."""

from typing import Any, Dict, List, Mapping, Optional

__all__ = ["ShardplanError", "ShardplanConnectionError"]


class ShardplanError(Exception):
    """A non-2xx answer from the service, carrying its RFC 9457 problem details.

    Attributes:
        status: the HTTP status code (``None`` for a connection failure).
        type, title, detail, instance: the problem+json fields ("" when absent).
        errors: ``[{"field": ..., "message": ...}]`` for 400s; field paths follow the
            JSON as sent, e.g. ``source[1][0]`` or ``source.dims[1].axes[0]``.
        violations: for 422 policy violations, ``[{"policy": ..., "message": ...}]``.
        plan: for 422 policy violations, the plan that violated the policy.
        suggested_constraints: for 422 policy violations with ``strategy="xla"``, the
            intermediate shardings (each with ``partition_spec`` and ``sharding``) that
            let XLA do the reshard without a full rematerialization.
        body: the decoded problem object (or ``{"detail": text}`` for a non-JSON body).
        headers: the response headers.
    """

    def __init__(
        self,
        status: Optional[int],
        body: Optional[Mapping[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
        method: str = "",
        url: str = "",
    ) -> None:
        body = dict(body or {})
        self.status = status
        self.body: Dict[str, Any] = body
        self.headers: Dict[str, str] = dict(headers or {})
        self.method = method
        self.url = url
        self.type: str = str(body.get("type") or "")
        self.title: str = str(body.get("title") or "")
        self.detail: str = str(body.get("detail") or "")
        self.instance: str = str(body.get("instance") or "")
        self.errors: List[Dict[str, Any]] = list(body.get("errors") or [])
        self.violations: List[Dict[str, Any]] = list(body.get("violations") or [])
        self.plan: Optional[Dict[str, Any]] = body.get("plan")
        sc = body.get("suggested_constraints")
        if sc is None and isinstance(self.plan, dict):
            sc = self.plan.get("suggested_constraints")
        self.suggested_constraints: List[Dict[str, Any]] = list(sc or [])
        super().__init__(self._message())

    @property
    def fields(self) -> List[str]:
        """The field paths named in ``errors``."""
        return [str(e.get("field", "")) for e in self.errors]

    def _message(self) -> str:
        head = "HTTP %s" % self.status if self.status is not None else "request failed"
        if self.title:
            head += " " + self.title
        parts = [head]
        if self.detail:
            parts.append(self.detail)
        extra = [
            "%s: %s" % (e.get("field"), e.get("message"))
            for e in self.errors
            if e.get("field") and e.get("message") and e.get("message") not in self.detail
        ]
        if extra:
            parts.append("; ".join(extra))
        if self.suggested_constraints:
            specs = [
                s.get("partition_spec") or (s.get("sharding") or {}).get("text", "")
                for s in self.suggested_constraints
            ]
            parts.append("suggested constraints: " + ", ".join(x for x in specs if x))
        msg = ": ".join(parts)
        if self.method or self.url:
            msg += " (%s %s)" % (self.method, self.url)
        return msg


class ShardplanConnectionError(ShardplanError):
    """The service could not be reached (refused, timed out, DNS...). ``status`` is None."""

    def __init__(self, reason: str, method: str = "", url: str = "") -> None:
        super().__init__(None, {"title": "Connection failed", "detail": reason}, None, method, url)
