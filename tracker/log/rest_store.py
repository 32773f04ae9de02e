"""Writer to an MLflow tracking server over its REST API (the shared, team path).

The server chooses run ids, so records are written level by level (network runs before
their layer runs) and parent ids are mapped on the way. Within a level, runs are written
by a pool of threads over one keep-alive HTTP session; each run costs create (with all
tags), one log-batch per 100 params / 1000 metrics, and update (status, end time).
Transient failures (connection resets, timeouts, 429, 5xx) are retried as MLflow's client retries
them: as often, as far apart and each waited on as long as MLflow's ``MLFLOW_HTTP_REQUEST_*`` variables say;
a runs/create only once the server says it has no run of that write (its ``tracker.write`` tag): the
server may have made it, its answer lost.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tracker.console import named
from tracker.decode import loads_json
from tracker.errors import ExperimentDeletedError, NothingLoggedError, StoreError
from tracker.log.record import KEY_TAG, KIND_TAG, PARENT_TAG, FinalRecord
from tracker.log.store import Experiment, StoredRun, parent_levels
from tracker.settings import StoreLocation, http_request_setting

WORKERS = 16
#: Seconds a request waits to connect, and then for each read, where ``MLFLOW_HTTP_REQUEST_TIMEOUT``
#: does not say: MLflow's default (tracker's client waited 30 s whatever it said until 0.9.8).
TIMEOUT_S = 120
#: Retries of a request that failed for a passing reason, after its first try, where
#: ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` does not say (``tracker`` sets it to this, for MLflow's client).
RETRIES = 3
#: ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR`` where unset (``tracker`` sets it to this, for MLflow's client).
BACKOFF_FACTOR = 1
#: ``MLFLOW_HTTP_REQUEST_BACKOFF_JITTER`` where unset: MLflow's default.
BACKOFF_JITTER = 1.0
#: The longest wait between two tries, as urllib3's (so MLflow's client's) ``Retry.DEFAULT_BACKOFF_MAX``.
BACKOFF_MAX_S = 120.0
#: How long a tracking server has to answer ``/health`` before it is said to be unreachable.
HEALTH_TIMEOUT_S = 5.0
#: MLflow's log-batch limits (mlflow.utils.validation).
MAX_PARAMS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
MAX_ENTITIES_PER_BATCH = 1000


def new_session(workers: int = 1) -> Any:
    """A requests session to a tracking server, with MLflow's credentials from the environment
    (``MLFLOW_TRACKING_TOKEN``, or ``MLFLOW_TRACKING_USERNAME`` and ``_PASSWORD``)."""
    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=workers, pool_maxsize=workers)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    if token := os.environ.get("MLFLOW_TRACKING_TOKEN"):
        session.headers["Authorization"] = f"Bearer {token}"
    elif user := os.environ.get("MLFLOW_TRACKING_USERNAME"):
        session.auth = (user, os.environ.get("MLFLOW_TRACKING_PASSWORD", ""))
    return session


#: Seconds an answer to ``/health`` stands for: a command that checks the server, then opens its
#: store, asks once (it asked twice, back to back, until 0.9.2).
HEALTH_FRESH_S = 2.0
_ANSWERED: dict[str, float] = {}


def check_reachable(uri: str, session: Any = None) -> None:
    """A StoreError in one line unless the tracking server at ``uri`` answers its ``/health`` within
    :data:`HEALTH_TIMEOUT_S`: said at once, before MLflow's client retries a request for minutes.
    An answer in the last :data:`HEALTH_FRESH_S` stands."""
    import requests

    if time.monotonic() - _ANSWERED.get(uri, -HEALTH_FRESH_S) < HEALTH_FRESH_S:
        return
    try:
        response = (session or new_session()).get(f"{uri}/health", timeout=HEALTH_TIMEOUT_S)
    except requests.RequestException as exc:
        raise StoreError(f"cannot reach tracking server {uri}: {_reason(exc)}") from None
    if response.status_code == 404:  # reached, and no MLflow there: not an outage (its runs were spooled, for a
        # URI that could never take them, until 0.9.4)
        from tracker.errors import ConfigError

        raise ConfigError(f"tracking server {uri} answered 404 to /health: no MLflow server at that address (is the "
                          "URI's path right? an MLflow server answers at http(s)://HOST:PORT)")
    if response.status_code >= 400:
        raise StoreError(f"tracking server {uri} answered {response.status_code} to /health")
    _ANSWERED[uri] = time.monotonic()


def backoff_s(failures: int, factor: float, jitter: float) -> float:
    """Seconds to wait before the next try of a request that failed ``failures`` times in a row, as
    MLflow's client waits (urllib3's ``Retry.get_backoff_time``): none after the first failure, then
    ``factor`` times 2, 4, 8... seconds, plus up to ``jitter`` seconds at random, at most
    :data:`BACKOFF_MAX_S`."""
    if failures <= 1:
        return 0.0
    wait = factor * 2 ** (failures - 1)
    if jitter:
        wait += random.random() * jitter
    return float(max(0.0, min(BACKOFF_MAX_S, wait)))


class RestStore:
    def __init__(self, location: StoreLocation, workers: int = WORKERS) -> None:
        self.location = location
        self.workers = workers
        self.session = new_session(workers)
        check_reachable(location.uri, self.session)

    def call(self, method: str, endpoint: str, body: dict | None = None, query: dict | None = None,
             made: Callable[[], dict | None] | None = None) -> dict:
        """The server's answer to one request, tried again where it failed for a passing reason.
        ``made``: for a request that is not to be acted on twice (runs/create), asked before each
        retry what the server made of an earlier try whose answer was lost (its answer, or None)."""
        import requests

        url = f"{self.location.uri}/api/2.0/mlflow/{endpoint}"
        last = ""
        # as many retries as MLflow's client makes: MLFLOW_HTTP_REQUEST_MAX_RETRIES (four tries whatever
        # it said, and a wait after the last, until 0.9.7), as far apart and each waited on as long as
        # its _BACKOFF_FACTOR, _BACKOFF_JITTER and _TIMEOUT say (tracker's own 30 s and waits until 0.9.8)
        tries = 1 + int(http_request_setting("MLFLOW_HTTP_REQUEST_MAX_RETRIES", RETRIES))
        factor = http_request_setting("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", BACKOFF_FACTOR)
        jitter = http_request_setting("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", BACKOFF_JITTER)
        timeout = http_request_setting("MLFLOW_HTTP_REQUEST_TIMEOUT", TIMEOUT_S)
        for attempt in range(tries):
            if attempt:
                time.sleep(backoff_s(attempt, factor, jitter))
                if made is not None:
                    try:
                        earlier = made()
                    except StoreError:  # not to be known: a retry might act twice (and a write cut short
                        said = "one try" if attempt == 1 else f"{attempt} tries"  # leaves its runs to sync)
                        raise StoreError(f"tracking server {self.location.uri}: {endpoint} failed after {said} "
                                         f"({last}), not tried again: whether the server had acted on it could not "
                                         "be asked") from None
                    if earlier is not None:
                        return earlier
            try:
                response = self.session.request(method, url, json=body, params=query, timeout=timeout)
            except requests.RequestException as exc:
                last = _reason(exc)
            else:
                if response.status_code < 400:
                    return _answer(self.location.uri, endpoint, response)
                if response.status_code not in (429, 500, 502, 503, 504):
                    raise RestError(endpoint, response)
                last = f"HTTP {response.status_code}"
        said = f"{tries} tries" if tries > 1 else "one try"
        raise StoreError(f"tracking server {self.location.uri}: {endpoint} failed after {said} ({last})")

    def close(self) -> None:
        self.session.close()

    # -- experiments ------------------------------------------------------------------
    def experiment(self, name: str, create: bool = True) -> Experiment:
        try:
            body = self.call("GET", "experiments/get-by-name", query={"experiment_name": name})
        except RestError as exc:
            if exc.code != "RESOURCE_DOES_NOT_EXIST":
                raise
            if not create:  # the server's experiments named, as an embedded store names its own (since 0.9.2)
                found = self.call("POST", "experiments/search", {"max_results": 1000, "view_type": "ACTIVE_ONLY"})
                names = sorted((e["name"] for e in found.get("experiments", [])), key=str.lower)
                raise NothingLoggedError(f"no experiment named {name!r} on {self.location.uri} "
                                         f"(experiments: {named(names) or 'none'})") from None
            try:
                self.call("POST", "experiments/create", {"name": name})
            except RestError as exc2:
                if exc2.code != "RESOURCE_ALREADY_EXISTS":
                    raise
            body = self.call("GET", "experiments/get-by-name", query={"experiment_name": name})
        exp = body["experiment"]
        if exp.get("lifecycle_stage") != "active":
            raise ExperimentDeletedError(f"experiment {name!r} is deleted; restore it in the MLflow UI or pick another "
                                         "name")
        return Experiment(exp["experiment_id"], name, exp.get("artifact_location", ""))

    def describe_experiment(self, experiment: Experiment, text: str) -> None:
        from tracker.log.record import NOTE_TAG

        self.call("POST", "experiments/set-experiment-tag",
                  {"experiment_id": experiment.experiment_id, "key": NOTE_TAG, "value": text})

    # -- runs -------------------------------------------------------------------------
    def write(self, experiment: Experiment, records: list[FinalRecord], known: dict[str, str] | None = None) -> list[str]:
        """Write the records, parents first; ``known``: records' ids already on this server (ours ->
        the server's), for a record whose parent was written before (a batch cut short, sent again)."""
        ids: dict[str, str] = dict(known or {})  # our run id -> the server's
        done: dict[str, str] = {}  # the records written whole (updated), by the threads that wrote them
        try:
            with ThreadPoolExecutor(self.workers) as pool:
                for level in parent_levels(records):
                    written = pool.map(lambda i: self._write_one(experiment, records[i], ids, done), level)
                    for i, server_id in zip(level, written):
                        ids[records[i].run_id] = server_id
        except KeyboardInterrupt as exc:
            # a Ctrl-C lands in this thread while the pool writes: the pool finishes the runs it began (the
            # level), so the batch may be on the server whole. What was written goes with the interrupt
            # (``written``: our run id -> the server's), for the logger to tell (since 0.9.8)
            exc.written = done  # type: ignore[attr-defined]
            raise
        return [ids[r.run_id] for r in records]

    def _write_one(self, experiment: Experiment, r: FinalRecord, ids: dict[str, str],
                   done: dict[str, str] | None = None) -> str:
        from tracker.log.outbox import WRITE_TAG

        tags = dict(r.tags)
        if r.parent_id:
            tags[PARENT_TAG] = ids.get(r.parent_id, r.parent_id)
        mark = tags.get(WRITE_TAG)

        def made() -> dict | None:
            # the run an earlier try made, its answer lost (a connection closed after the server acted): a
            # retry made a second, empty and RUNNING for good, until 0.9.8
            found = next(self._search(experiment, f"tags.`{WRITE_TAG}` = '{_quote(mark)}'"), None)  # type: ignore[arg-type]
            return {"run": found} if found is not None else None

        created = self.call(
            "POST",
            "runs/create",
            {
                "experiment_id": experiment.experiment_id,
                "run_name": r.name,
                "user_id": tags.get("mlflow.user", "unknown"),
                "start_time": r.start_time_ms,
                "tags": [{"key": k, "value": v} for k, v in tags.items()],
            },
            made=made if mark else None,  # a record of an outbox file older than 0.9.0 has none: tried as before
        )
        run_id = created["run"]["info"]["run_id"]
        params = [{"key": k, "value": v} for k, v in r.params.items()]
        metrics = [
            {"key": k, "value": v, "timestamp": ts, "step": step} for k, v, ts, step in r.metric_points()
        ]
        try:
            while params or metrics:
                p_chunk, params = params[:MAX_PARAMS_PER_BATCH], params[MAX_PARAMS_PER_BATCH:]
                room = min(MAX_METRICS_PER_BATCH, MAX_ENTITIES_PER_BATCH - len(p_chunk))
                m_chunk, metrics = metrics[:room], metrics[room:]
                self.call("POST", "runs/log-batch", {"run_id": run_id, "params": p_chunk, "metrics": m_chunk})
            if r.artifacts:
                self._log_artifacts(run_id, r.name, r.artifacts)
            self.call("POST", "runs/update", {"run_id": run_id, "status": r.status, "end_time": r.end_time_ms})
        except StoreError:
            # the batch goes to the outbox, to be sent whole again: the run begun here goes, as `tracker sync`
            # deletes what a write cut short left (a server refusing artifacts kept a RUNNING run until 0.9.8)
            self._discard(run_id)
            raise
        if done is not None:
            done[r.run_id] = run_id
        return run_id

    def _discard(self, run_id: str) -> None:
        """Delete a run this write began and could not finish, where the server takes it at one try
        within :data:`HEALTH_TIMEOUT_S`; else it stays, RUNNING, for `tracker sync` to delete."""
        import requests

        url = f"{self.location.uri}/api/2.0/mlflow/runs/delete"
        with contextlib.suppress(requests.RequestException):
            self.session.post(url, json={"run_id": run_id}, timeout=HEALTH_TIMEOUT_S)

    def _log_artifacts(self, run_id: str, name: str, artifacts: dict) -> None:
        """Upload a run's artifacts through MLflow's client; its failure (the server's artifact store
        refusing them, a proxy taking no PUT) a StoreError in one line: MLflow's exception, or
        requests' with the server's HTML page, until 0.9.8 (a traceback, the batch said interrupted)."""
        import tempfile
        from pathlib import Path

        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        from tracker.log.store import write_artifacts_locally

        with tempfile.TemporaryDirectory() as tmp:
            write_artifacts_locally(Path(tmp), artifacts)
            try:
                MlflowClient(self.location.uri).log_artifacts(run_id, tmp)
            except (MlflowException, OSError) as exc:  # requests' exceptions are OSErrors
                raise StoreError(artifacts_failed_line(self.location.uri, name, exc)) from None

    def _search(self, experiment: Experiment, flt: str) -> Iterator[dict[str, Any]]:
        """Every run (as the REST API gives it) of the experiment that the filter matches, page by page."""
        token = None
        while True:
            body: dict[str, Any] = {"experiment_ids": [experiment.experiment_id], "filter": flt, "max_results": 1000}
            if token:
                body["page_token"] = token
            page = self.call("POST", "runs/search", body)
            yield from page.get("runs", [])
            token = page.get("next_page_token")
            if not token:
                return

    def batch_runs(self, experiment: Experiment, batch: str) -> dict[str, tuple[str, str]]:
        """The runs an outbox batch put on this server (by their ``tracker.write`` tag): our record
        id -> (the server's run id, its status)."""
        from tracker.log.outbox import WRITE_TAG

        out = {}
        for run in self._search(experiment, f"tags.`{WRITE_TAG}` LIKE '{_quote(batch)}/%'"):
            record_id = _tags(run).get(WRITE_TAG, "").partition("/")[2]
            out[record_id] = (run["info"]["run_id"], run["info"]["status"])
        return out

    def delete_runs(self, run_ids: list[str]) -> None:
        """Delete runs (MLflow's soft delete: ``mlflow gc`` removes them for good)."""
        for run_id in run_ids:
            self.call("POST", "runs/delete", {"run_id": run_id})

    def measured_keys(
        self, experiment: Experiment, kind: str | None = None, statuses: tuple[str, ...] = ("FINISHED",),
        tag: str = KEY_TAG, having: str | None = None,
    ) -> set[str]:
        keys: set[str] = set()
        for status in statuses:  # MLflow's search has no IN for attributes.status
            flt = f"attributes.status = '{status}'"
            if kind:
                flt += f" and tags.`tracker.kind` = '{kind}'"
            for run in self._search(experiment, flt):
                tags = _tags(run)
                if tag in tags and (having is None or having in tags):
                    keys.add(tags[tag])
        return keys

    def runs_with_prefix(self, experiment: Experiment, prefix: str,
                         kinds: tuple[str, ...] | None) -> list[tuple[str, str]]:
        # the server's search matches no id prefix: every run of the kind (of any kind, or none, where kinds
        # is None), page by page
        if kinds is None:
            return sorted((run["info"]["run_id"], _tags(run).get(KIND_TAG, "")) for run in self._search(experiment, "")
                          if run["info"]["run_id"].startswith(prefix))
        return sorted((run["info"]["run_id"], kind) for kind in kinds
                      for run in self._search(experiment, f"tags.`{KIND_TAG}` = '{_quote(kind)}'")
                      if run["info"]["run_id"].startswith(prefix))

    def find_run(self, experiment: Experiment, config_key: str, status: str = "FINISHED",
                 having_metric: str | None = None) -> StoredRun | None:
        flt = f"attributes.status = '{status}' and tags.`tracker.config_key` = '{_quote(config_key)}'"
        if having_metric is None:
            body = {"experiment_ids": [experiment.experiment_id], "filter": flt, "max_results": 1,
                    "order_by": ["attributes.start_time DESC"]}
            runs = self.call("POST", "runs/search", body).get("runs", [])
        else:  # MLflow's search cannot ask whether a run has a metric (a comparison skips a NaN): the
            # configuration's runs (its repeats: a few) read, the newest that logged it kept
            runs = sorted((r for r in self._search(experiment, flt)
                           if any(m.get("key") == having_metric for m in r.get("data", {}).get("metrics", []))),
                          key=lambda r: int(r["info"].get("start_time") or 0), reverse=True)
        if not runs:
            return None
        info, data = runs[0]["info"], runs[0].get("data", {})
        return StoredRun(
            run_id=info["run_id"],
            name=info.get("run_name", ""),
            status=info["status"],
            params={p["key"]: p["value"] for p in data.get("params", [])},
            metrics={m["key"]: m["value"] for m in data.get("metrics", [])},
            tags=_tags(runs[0]),
        )


def _json_object(content: str | bytes) -> dict | None:
    """``content`` (a server's answer) read as a JSON object; None where it is none: not JSON, nested past
    Python's recursion limit (a RecursionError's traceback until 0.9.15), an array or a number."""
    try:
        body = loads_json(content)
    except ValueError:  # decode.Undecodable
        return None
    return body if isinstance(body, dict) else None


def _answer(uri: str, endpoint: str, response: Any) -> dict:
    """A successful answer's JSON object, or a ConfigError in one line where it is none: a page of
    HTML with status 200 (a login portal, another service at the address) was read as JSON until
    0.9.7, and said as the parser's "Expecting value: line 1 column 1 (char 0)"."""
    if not response.content:
        return {}
    body = _json_object(response.content)
    if body is None:
        from tracker.errors import ConfigError

        raise ConfigError(not_json_line(uri, endpoint, response.text))
    return body


def not_json_line(uri: str | None, endpoint: str | None, text: str) -> str:
    """The one line of a request answered, with a success, by something that is not MLflow's JSON."""
    began = " ".join(text.split())[:60]
    return (f"tracking server{f' {uri}' if uri else ''} answered {endpoint or 'a request'} with a page that is not "
            f"MLflow's JSON (it began {began!r}): is it an MLflow server, not a login page or another service, and "
            "is the URI's path right?")


def _tags(run: dict[str, Any]) -> dict[str, str]:
    """A run's tags, as the REST API's search gives a run, by key."""
    return {kv["key"]: kv["value"] for kv in run.get("data", {}).get("tags", [])}


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


class RestError(StoreError):
    def __init__(self, endpoint: str, response: Any) -> None:
        body = _json_object(response.content) or {}  # an array, a number: an AttributeError until 0.9.15
        self.code = body.get("error_code", f"HTTP_{response.status_code}")
        if response.status_code in (401, 403):
            super().__init__(refused_line(response.status_code, endpoint, "Authorization" in response.request.headers))
            return
        said = body.get("message") or _plain_text(response.text)
        super().__init__(f"tracking server refused {endpoint}: {self.code}: {said}")


def refused_line(status: int, endpoint: str, credentials: bool | None) -> str:
    """The one line of a 401 or 403: which credentials to set (``credentials``: whether some were sent; None: not known)."""
    who = {True: "the credentials were refused", False: "no credentials were given",
           None: "the credentials were refused, or none were given"}[credentials]
    account = "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to an account of the server"
    if os.environ.get("MLFLOW_TRACKING_TOKEN"):  # a token refused was not named, only the account's variables, until
        # 0.9.7 (and tracker's client sends the token where both are set: it must go for the account to be tried)
        return (f"tracking server answered {status} to {endpoint}: {who}; set MLFLOW_TRACKING_TOKEN (set now) to a "
                f"token the server takes, or unset it and set {account}")
    return f"tracking server answered {status} to {endpoint}: {who}; set {account}"


def _plain_text(text: str) -> str:
    """A body that is not MLflow's JSON, in a line: a page of HTML (another server at that address)
    said as such, not its first 200 characters over several lines (until 0.9.4)."""
    if text.lstrip()[:1] == "<":
        return "a page of HTML, not MLflow's answer (is it an MLflow server, and is the URI's path right?)"
    return " ".join(text.split())[:200]


#: MLflow's client words an HTTP failure "API request to endpoint /api/2.0/mlflow/X failed with error
#: code N != 200. Response body: '...'", and its retries "Max retries exceeded ... too many N error responses".
_MLFLOW_HTTP = re.compile(r"API request to endpoint /api/2\.0/mlflow/(\S+) failed with error code (\d+) != 200"
                          r"\. Response body: '(.*)'", re.S)
#: and a success whose body is not JSON "API request to endpoint was successful but the response body was not in
#: a valid JSON format. Response body: '...'" (naming no endpoint)
_MLFLOW_NOT_JSON = re.compile(r"API request to endpoint was successful but the response body was not in a valid JSON "
                              r"format\. Response body: '(.*)'", re.S)
_MLFLOW_RETRIES = re.compile(r"Max retries exceeded with url: /api/2\.0/mlflow/(\S+?)[?\s].*?(too many (\d+) error "
                             r"responses)", re.S)


#: The error codes of a 401 and a 403 in an error object (MLflow's names, or the status itself).
_REFUSED = {"UNAUTHENTICATED": 401, "401": 401, "PERMISSION_DENIED": 403, "403": 403}


def mlflow_http_line(uri: str | None, exc: BaseException) -> str | None:
    """An MlflowException from MLflow's own client (the registry, a warehouse load through the API)
    that is an HTTP failure, in one line as tracker's own client says it; None for any other (a
    traceback of 40 lines, or a 200-character body over several, until 0.9.4)."""
    text = str(getattr(exc, "message", exc))
    said = getattr(exc, "json", None)  # a RestException: the server's own error object
    code = str(said.get("error_code", "")) if isinstance(said, dict) else ""
    if code in _REFUSED:  # answered in JSON (a proxy, a token's service): a traceback until 0.9.7
        return refused_line(_REFUSED[code], "a request", None)
    if found := _MLFLOW_HTTP.search(text):
        endpoint, status, body = found[1], int(found[2]), found[3]
        if status in (401, 403):
            return refused_line(status, endpoint, None)
        said = (_json_object(body) or {}).get("message") or _plain_text(body)  # not JSON, or not MLflow's object
        return f"tracking server{f' {uri}' if uri else ''} answered {status} to {endpoint}: {said}"
    if found := _MLFLOW_NOT_JSON.search(text):  # a traceback until 0.9.7
        return not_json_line(uri, None, found[1])
    if found := _MLFLOW_RETRIES.search(text):
        return f"tracking server{f' {uri}' if uri else ''}: {found[1]} failed after MLflow's retries ({found[2]})"
    return None


def artifacts_failed_line(uri: str, name: str, exc: BaseException) -> str:
    """Why the artifacts of the run ``name`` did not reach the tracking server at ``uri``, in one line:
    the status the server (or a proxy before it) refused them with, and its own words where they are
    MLflow's or plain text (not its page of HTML); or why they could not be sent."""
    import requests

    from tracker.errors import os_reason

    response = getattr(exc, "response", None)
    if isinstance(exc, requests.HTTPError) and response is not None:  # MLflow's client: no retry of this status
        status = response.status_code
        if status in (401, 403):
            return refused_line(status, f"the artifacts of run {name!r}", None)
        try:
            said = response.json().get("message") or ""
        except (ValueError, AttributeError):  # not JSON, or not MLflow's object
            said = "" if response.text.lstrip()[:1] == "<" else " ".join(response.text.split())[:200]
        reason = f" {response.reason}" if response.reason else ""
        return f"tracking server {uri} refused the artifacts of run {name!r}: HTTP {status}{reason}" + (
            f": {said}" if said else "")
    text = str(getattr(exc, "message", exc))
    if found := re.search(r"too many (\d+) error responses", text):  # a status MLflow's client retries, to the end
        return (f"tracking server {uri} refused the artifacts of run {name!r}: HTTP {found[1]} to each of MLflow's "
                "tries")
    if line := mlflow_http_line(uri, exc):  # the run's artifact location asked, and refused
        return f"{line} (the artifacts of run {name!r})"
    if isinstance(exc, OSError) and not isinstance(exc, requests.RequestException):  # an artifact folder of the
        return f"cannot write the artifacts of run {name!r} for {uri}: {os_reason(exc)}"  # server's, mounted here
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    return f"could not send the artifacts of run {name!r} to tracking server {uri}: {_reason(Exception(first))}"


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    if "timed out" in text.lower():
        return "timed out"
    if "RemoteDisconnected" in text:  # said as urllib3's tuple, ('Connection aborted.', RemoteDisconnected(...)), until 0.9.8
        return "the connection was closed without an answer"
    return text.splitlines()[0][:200]
