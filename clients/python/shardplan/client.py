"""HTTP client for the shardplan service (standard library only)."""

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Mapping, Optional

from .convert import request_fields
from .errors import ShardplanConnectionError, ShardplanError

__all__ = ["Client", "Result", "TextResult", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:8080"
_USER_AGENT = "shardplan-python/0.1"


class Result(dict):
    """A decoded JSON object answer. It is a plain dict plus response metadata.

    Attributes:
        cache: the ``X-Cache`` header, ``"hit"`` or ``"miss"`` (``None`` when absent).
        status: the HTTP status code.
        headers: the response headers.
        request_id: the ``X-Request-Id`` header, if any.
    """

    cache: Optional[str]
    status: int
    headers: Dict[str, str]
    request_id: Optional[str]


class TextResult(str):
    """A ``text/plain`` answer (a diagram) with the same metadata as :class:`Result`."""

    cache: Optional[str]
    status: int
    headers: Dict[str, str]
    request_id: Optional[str]


def _attach(obj: Any, status: int, headers: Mapping[str, str]) -> Any:
    obj.status = status
    obj.headers = dict(headers)
    obj.cache = _header(headers, "X-Cache")
    obj.request_id = _header(headers, "X-Request-Id")
    return obj


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    low = name.lower()
    for k, v in headers.items():
        if k.lower() == low:
            return v
    return None


def _modules(fields: Dict[str, Any], **texts: Optional[str]) -> Dict[str, Any]:
    """Adds the module texts given (not None) to fields, each checked to be a str."""
    for key, text in texts.items():
        if text is None:
            continue
        if not isinstance(text, str):
            raise TypeError("%s must be the module's text (str), not %s" % (key, type(text).__name__))
        fields[key] = text
    return fields


def _merge(body: Optional[Mapping[str, Any]], fields: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = dict(body or {})
    out.update(fields)
    return request_fields(out)


class Client:
    """A small client for the shardplan HTTP/JSON API (see docs/API.md).

    Request bodies are given as keyword arguments named like the JSON fields, or as a
    dict in the first positional argument (keywords override it)::

        c = Client("http://127.0.0.1:8080")
        r = c.reshard(mesh="X=2,Y=4", shape=[2048, 2048], dtype="f32",
                      source=["X", None], target=["Y", "X"])
        r["summary"]["time_us"], r.cache

    Non-2xx answers raise :class:`ShardplanError`; an unreachable service raises
    :class:`ShardplanConnectionError` (a subclass).
    """

    def __init__(self, base_url: str = DEFAULT_URL, timeout: float = 30, headers: Optional[Mapping[str, str]] = None) -> None:
        if "://" not in base_url:
            base_url = "http://" + base_url
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return "Client(%r, timeout=%r)" % (self.base_url, self.timeout)

    # -- endpoints ------------------------------------------------------------------

    def reshard(self, body: Optional[Mapping[str, Any]] = None, /, **fields: Any) -> Result:
        """POST /v1/reshard: a plan turning ``source`` into ``target``."""
        return self._request("POST", "/v1/reshard", _merge(body, fields))

    def reshard_diagram(self, body: Optional[Mapping[str, Any]] = None, /, **fields: Any) -> TextResult:
        """POST /v1/reshard with ``Accept: text/plain``: the mesh-contents diagram."""
        return self._request("POST", "/v1/reshard", _merge(body, fields), accept="text/plain")

    def tiles(self, body: Optional[Mapping[str, Any]] = None, /, **fields: Any) -> Result:
        """POST /v1/tiles: every device's tile of a sharded tensor (and ``locate``)."""
        return self._request("POST", "/v1/tiles", _merge(body, fields))

    def graph(self, body: Optional[Mapping[str, Any]] = None, /, module: Optional[str] = None, **fields: Any) -> Result:
        """POST /v1/graph: sharding propagation over a graph of ops, with its collectives.

        Give the graph as JSON fields (``mesh``, ``tensors``, ``ops``...), or a StableHLO
        module's text as ``module`` (``jax.jit(f).lower(*args).as_text()``), sent as
        ``{"module": text, ...}`` with the other fields (``function``, ``strategy``,
        ``policy``...) beside it."""
        return self._request("POST", "/v1/graph", _merge(body, _modules(fields, module=module)))

    def audit(self, body: Optional[Mapping[str, Any]] = None, /, module: Optional[str] = None,
              hlo_module: Optional[str] = None, **fields: Any) -> Result:
        """POST /v1/audit: where a program's communication time and memory go, line by line.

        Give a program as ``graph`` takes it (JSON fields, or a StableHLO module's text as
        ``module``), or a compiled module's text as ``hlo_module``
        (``jax.jit(f).lower(*args).compile().as_text()``) with ``mesh``; options such as
        ``cost_model`` and ``memory_budget_bytes_per_device`` go beside it."""
        return self._request("POST", "/v1/audit", _merge(body, _modules(fields, module=module, hlo_module=hlo_module)))

    def audit_report(self, body: Optional[Mapping[str, Any]] = None, /, module: Optional[str] = None,
                     hlo_module: Optional[str] = None, **fields: Any) -> TextResult:
        """POST /v1/audit with ``Accept: text/plain``: the audit as a terminal report."""
        return self._request("POST", "/v1/audit", _merge(body, _modules(fields, module=module, hlo_module=hlo_module)), accept="text/plain")

    def transfer(self, body: Optional[Mapping[str, Any]] = None, /, **fields: Any) -> Result:
        """POST /v1/transfer: a plan moving tensors from a source placement to target
        placements (replicas) on one fabric; ``include=["schedule"]`` adds every rank's
        schedule and a ``plan_id``."""
        return self._request("POST", "/v1/transfer", _merge(body, fields))

    def schedule(self, plan_id: str, rank: Optional[int] = None) -> Result:
        """GET /v1/plans/{plan_id}/schedule: the per-rank schedule of a memoized plan
        asked with ``include=["schedule"]``, or rank ``rank``'s alone (its ``schedule``
        member is what :func:`shardplan.run` takes). ShardplanError 404 when the plan is
        not cached, has no schedule, or the rank has none."""
        path = "/v1/plans/" + urllib.parse.quote(plan_id, safe="") + "/schedule"
        if rank is not None:
            if isinstance(rank, bool) or not isinstance(rank, int):
                raise TypeError("rank must be an int, not %s" % type(rank).__name__)
            path += "?rank=%d" % rank
        return self._request("GET", path)

    def cost_models(self) -> Result:
        """GET /v1/cost-models: the built-in bandwidth profiles and the default one."""
        return self._request("GET", "/v1/cost-models")

    def cost_model(self, name: str) -> Result:
        """GET /v1/cost-models/{name}."""
        return self._request("GET", "/v1/cost-models/" + urllib.parse.quote(name, safe=""))

    def plan(self, plan_id: str) -> Result:
        """GET /v1/plans/{plan_id}: a memoized plan (ShardplanError 404 when not cached)."""
        return self._request("GET", "/v1/plans/" + urllib.parse.quote(plan_id, safe=""))

    def healthz(self) -> Result:
        """GET /healthz."""
        return self._request("GET", "/healthz")

    def readyz(self) -> Result:
        """GET /readyz."""
        return self._request("GET", "/readyz")

    # -- transport ------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, accept: str = "application/json") -> Any:
        url = self.base_url + path
        data = None
        headers = {"Accept": accept + ", application/problem+json", "User-Agent": _USER_AGENT}
        headers.update(self.headers)
        if body is not None:
            data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status = resp.status
                raw = resp.read()
                rheaders = dict(resp.headers.items())
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            finally:
                e.close()
            raise ShardplanError(e.code, _problem(raw, e.headers.get("Content-Type", "")), dict(e.headers.items()), method, url) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            raise ShardplanConnectionError(str(reason), method, url) from e
        ctype = _header(rheaders, "Content-Type") or ""
        if accept == "text/plain" and not ctype.startswith("application/json"):
            return _attach(TextResult(raw.decode("utf-8", "replace")), status, rheaders)
        if not raw:
            return _attach(Result(), status, rheaders)
        try:
            decoded = json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise ShardplanError(status, {"title": "Invalid JSON answer", "detail": "%s: %s" % (e, raw[:200])}, rheaders, method, url) from None
        if isinstance(decoded, dict):
            return _attach(Result(decoded), status, rheaders)
        return decoded


def _problem(raw: bytes, ctype: str) -> Dict[str, Any]:
    text = raw.decode("utf-8", "replace")
    if "json" in ctype or text.lstrip().startswith("{"):
        try:
            obj = json.loads(text)
            if isinstance(obj, dict):
                return obj
        except ValueError:
            pass
    return {"detail": text.strip()}
