"""Where things live: the embedded default store, the project folders, the tracking URI.

Resolution order for the tracking URI: the ``--tracking-uri`` option, then the
``MLFLOW_TRACKING_URI`` environment variable, then the embedded store
``sqlite:///<runs dir>/mlflow.db`` with artifacts in ``<runs dir>/artifacts``.
The runs dir is ``./runs`` unless ``TRACKER_RUNS_DIR`` says otherwise.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tracker.console import decimal_number, integer_number
from tracker.errors import ConfigError, StoreError, TrackingUriError

#: The project root when running from a checkout (``pip install -e .``).
PROJECT_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_EXPERIMENT = "Default"
#: The largest batch size any command or campaign takes (predict's since 0.9.4, every one's since 0.9.7):
#: past it a network's FLOPs times the batch overflow DuckDB's 64-bit integers, nothing learnt reaches
#: near it, and no device holds its images. Until 0.9.7 profile took -b 99999999999999999999: a store
#: made, a FAILED run of a C++ message with no batch_size in the warehouse; describe printed figures
#: 10^20 times too large.
MAX_BATCH = 1 << 20

#: The largest whole number a spec file may give any size (a width, channels, a depth, a kernel, an
#: input size), and --input-size too (since 0.9.9: 100,000 px was tried, and said as memory not given,
#: status 1): ten times the widest a drawn spec has (320), more than any torchvision network's (2,048
#: to 4,096), and a 3x3 convolution of it both ways is 2.4 GB of weights. Until 0.9.7 any size was
#: read, and a width of 10**12 asked the allocator for 512 TB: a traceback from describe, profile
#: (after it made a store), predict and zoo prune.
MAX_SPEC_SIZE = 8192
#: The smallest input size a command or a campaign takes (--input-size, a campaign's input_sizes): one bound
#: for both, as MAX_SPEC_SIZE is their largest (a campaign took any size past it until 0.9.13, and said one of
#: 100,000 px as memory not given, a whole number past a float's range as a network that "cannot run on" it).
MIN_INPUT_SIZE = 8

#: The largest seed a command's --seed takes (zoo generate, zoo prune, data synth, mapping), as a search
#: space's [accuracy].seed: one numpy's and torch's generators both take. Python's random, which draws
#: them, takes -N as N: until 0.9.10 --seed -1 was taken without a word (zoo prune's and data synth's
#: the same as --seed 1, under another name), and any number of digits.
MAX_SEED = 2**32 - 1

#: The most networks one draw makes (``zoo generate --count``, a campaign's ``[networks.generate].count``: a dry
#: run of 100,000,000 hung drawing them until 0.9.8), so a generated spec's ``index`` is from 0 to one less. Here,
#: not in tracker.zoo.generator, so that the CLI's zoo commands read it without loading the generator.
MAX_GENERATE_COUNT = 100_000

#: The most networks a workload runs at once: all are built and traced in its one measuring child,
#: each runs in a thread of its own, and past a few dozen each has too thin a share of the cores
#: (or the GPU's streams) to finish inferences in a window; a draw of 50,000 was taken until 0.9.6
MAX_NETS = 32
#: The longest warm-up and window of a workload, in seconds (``mapping run --warmup`` and ``--duration``): a
#: day, where the default window is 10 s and one of an hour already spans a machine's drift through a day's
#: work. Until 0.9.14 any finite number was taken, and ``--duration 1e308`` measured its workload (a store made,
#: a run begun) until it was stopped.
MAX_WINDOW_S = 86_400
#: Worker processes ``tracker ui`` serves with unless told otherwise: one, for the one user on loopback.
#: MLflow's own default is 4 (``mlflow ui`` too), each importing MLflow's server (about 240 MB each);
#: one serves the UI's parallel requests on its threads, with no supervisor or resource tracker beside
#: it (since 0.9.20; MLflow's four until then: over the demo's store on two cores, 13 to 15 s to answer
#: on 20 to 25 CPU-seconds and 1.3 GB, against 8 to 10 s, 8 to 10 CPU-seconds and 540 MB). Here, not
#: in tracker.ui, so that the CLI's ``ui --workers`` reads it without loading that module at every start.
UI_WORKERS = 1

#: The most epochs a training runs: a training job's [training].num_epochs, a search space's [accuracy].epochs.
#: Six times the longest published recipes (MAE's 1,600 epochs on ImageNet; a few hundred are usual), and, as
#: an epoch is a step at least, 10,000 steps for a job whose dataset is one batch. Until 0.9.14 any number was
#: taken, so a typo's num_epochs = 100000000000 measured steps until it was stopped.
MAX_EPOCHS = 10_000
#: The most steps a training job measures ([training].max_steps): more than a whole ImageNet training of
#: ResNet-50 (90 epochs at batch 256, some 450,000 steps), where a job's figures rest on hundreds, and each
#: step is a point of seven metric histories in the store. Any number was taken until 0.9.14.
MAX_TRAINING_STEPS = 1_000_000

#: The least time limit of a measuring child, in seconds (``--timeout`` of profile's commands and of mapping
#: run, a campaign's ``timeout_s``), and the least memory cap, in MB (``--memory-limit-mb``, a campaign's
#: ``memory_limit_mb``): one bound for an option and its campaign key. Until 0.9.13 a campaign took any above
#: 0 (0.001 s: each configuration a FAILED run of reason timeout, where --timeout 0.001 was refused).
MIN_TIMEOUT_S = 1
#: The longest time limit of a measuring child, in seconds (the same options and campaign key, and a training job's
#: ``[training].step_timeout_s``, its wait for one step): a week, more than ``mapping run``'s default for its
#: longest warm-up and window (120 + 3 x two days, 518,520 s), so that a --timeout may cover any workload. Until
#: 0.9.14 any finite number was taken, and a typo's 1e308 let a hung child (or job) run until it was stopped.
MAX_TIMEOUT_S = 604_800
MIN_MEMORY_LIMIT_MB = 1


#: The numeric ``MLFLOW_HTTP_REQUEST_*`` variables MLflow (3.17.2) reads at each request, as it reads
#: them: their reader (ASCII digits alone, where MLflow's int() and float() take ``٣`` as 3, as tracker
#: did until 0.9.14), least value, and most (a number, or the internal variable MLflow takes it from,
#: and its default), and what they take in words. Until 0.9.7 a value MLflow could not use ended a
#: command in its traceback, at the first request through MLflow's client: after a measurement, a
#: RUNNING run left on the server, for MLFLOW_HTTP_REQUEST_TIMEOUT. MLflow's internal bounds come
#: first: it reads them at every request too, set or not the variables they bound (an unreadable
#: one was taken for MLflow's default here, and ended a command in MLflow's traceback, until 0.9.8).
#: The longest wait a socket takes, in seconds: the platform's time_t holds no deadline past it (Python's
#: threading.TIMEOUT_MAX), so a longer MLFLOW_HTTP_REQUEST_TIMEOUT (1e10, 1 and 400 zeros) was OverflowError's
#: traceback at the first request, through either client, until 0.9.13.
MAX_WAIT_S = 9_223_372_036
HTTP_REQUEST_VARIABLES: dict[str, tuple[Callable[[str], float | None], float, tuple[str, int] | int | None, str]] = {
    "_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT": (integer_number, 0, None, "a whole number of retries"),
    "_MLFLOW_HTTP_REQUEST_MAX_BACKOFF_FACTOR_LIMIT": (integer_number, 0, None, "a whole number of seconds"),
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": (integer_number, 0, ("_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT", 10),
                                        "a whole number of retries"),
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": (integer_number, 0, ("_MLFLOW_HTTP_REQUEST_MAX_BACKOFF_FACTOR_LIMIT", 120),
                                           "a whole number of seconds"),
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": (decimal_number, 0, None, "a number of seconds"),
    "MLFLOW_HTTP_REQUEST_TIMEOUT": (integer_number, 1, MAX_WAIT_S, "a whole number of seconds"),
}


def finite_number(value: float) -> bool:
    """Whether a number read from a file or the environment is finite: a whole number is, however many
    digits it has (``math.isfinite`` of one past a float's range raises OverflowError, which was a traceback
    until 0.9.13: a campaign's ``repeats`` of 400 digits, an ``MLFLOW_HTTP_REQUEST_*`` variable before any
    command); a float where ``math.isfinite`` says so."""
    return isinstance(value, int) or math.isfinite(value)


def http_request_setting(name: str, default: float) -> float:
    """The value of one of :data:`HTTP_REQUEST_VARIABLES`, read as MLflow reads it (``default``
    where unset), or a ConfigError in one line naming the variable, its value and what it takes."""
    read, least, most, what = HTTP_REQUEST_VARIABLES[name]
    raw = os.environ.get(name)
    if raw is None:
        return default
    if isinstance(most, tuple):  # MLflow's internal bound, where it was moved (an unreadable one: said, naming it)
        most = int(http_request_setting(most[0], most[1]))
    value = read(raw)
    if value is None or not finite_number(value) or value < least or (most is not None and value > most):
        bound = f"{least} to {most}" if most is not None else f"{least} or more"
        raise ConfigError(f"{name}={raw!r} in the environment: it takes {what}, {bound} (unset it for the default)")
    return value


def check_http_environment() -> None:
    """Every one of :data:`HTTP_REQUEST_VARIABLES` set is one MLflow can use, or a ConfigError in
    one line: said before a command does anything, not in a traceback after a measurement."""
    for name in HTTP_REQUEST_VARIABLES:
        http_request_setting(name, 0)


def project_dir(name: str) -> Path:
    """A top-level project folder (``schemas``, ``sql``, ``experiments``)."""
    env = os.environ.get(f"TRACKER_{name.upper()}_DIR")
    path = Path(env) if env else PROJECT_ROOT / name
    if not path.is_dir():
        raise StoreError(f"the project folder {name}/ was not found at {path}")
    return path


def runs_dir() -> Path:
    """The folder of the embedded default store (made on first use)."""
    return Path(os.environ.get("TRACKER_RUNS_DIR") or "runs").resolve()  # set but empty: runs/ (the current folder until 0.9.2)


def warehouse_path(explicit: str | Path | None = None, tracking_uri: str | None = None) -> Path:
    """The DuckDB warehouse: ``--warehouse``, else ``TRACKER_WAREHOUSE``, else ``warehouse.duckdb``
    beside an embedded store's database (``runs/`` for the default store; ``warehouse-NAME.duckdb``
    beside a database ``NAME.db`` of another name), else, for a server,
    ``runs/warehouse-HOST-PORT.duckdb``. So each store and each server has its own warehouse: a
    load from one never counts another's runs as deleted."""
    # set but blank: unset, as TRACKER_RUNS_DIR (" " was a file named " " in the current folder until 0.9.11)
    chosen = explicit or os.environ.get("TRACKER_WAREHOUSE", "").strip() or None
    if chosen:
        path = Path(chosen).resolve()
    else:
        location = resolve_location(tracking_uri)  # an unsupported URI is said here, in one line
        db = location.db_path
        # two databases in one folder (sqlite:///a.db, b.db) have a warehouse each: one file, shared,
        # held the last loaded's runs, until 0.9.2
        path = (db.parent / ("warehouse.duckdb" if db.stem == "mlflow" else f"warehouse-{db.stem}.duckdb")
                if db is not None else runs_dir() / f"warehouse-{location.server_name}.duckdb")
    return usable_warehouse(path)  # before a command reads the store for it


def store_files(tracking_uri: str | None = None) -> tuple[Path, str]:
    """Where files that belong with a store's runs go (the demo's network specs and report, since
    0.9.11; ``./runs`` of the current folder before, whatever the store): the folder of an embedded
    store's database, else ``runs/``; and a suffix naming the store among others there, as the
    warehouse's name does (``""`` for ``mlflow.db``, ``-NAME`` beside ``NAME.db``, ``-HOST-PORT`` for a server)."""
    location = resolve_location(tracking_uri)
    db = location.db_path
    if db is None:
        return runs_dir(), f"-{location.server_name}"
    return db.parent, "" if db.stem == "mlflow" else f"-{db.stem}"


def usable_warehouse(path: Path) -> Path:
    """``path``, unless DuckDB cannot keep a database there: it takes a ``?`` in a file's path for
    the start of its options and writes its journal elsewhere (seen with DuckDB 2.0.0)."""
    if "?" in str(path):
        raise StoreError(f"cannot keep a warehouse at {path}: DuckDB reads a '?' in its path as the start of "
                         "options; choose a path without one (--warehouse or TRACKER_WAREHOUSE)")
    return path


def sqlite_uri(db_path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file. SQLAlchemy (so MLflow) reads the path of such a URL
    percent-decoded and up to a ``?``: those two are written escaped, so that a folder named
    ``a%20b`` or ``why?`` is the folder opened, not ``a b`` or ``why``."""
    return "sqlite:///" + str(db_path).replace("%", "%25").replace("?", "%3F")


def sqlite_path(uri: str) -> Path:
    """The file a ``sqlite:///`` URL names, read as SQLAlchemy reads it (inverse of :func:`sqlite_uri`)."""
    from urllib.parse import unquote

    return Path(unquote(uri.removeprefix("sqlite:///").split("?", 1)[0]))


def sqlite_read_only(db_path: Path) -> str:
    """SQLite's own URI of a file opened read-only: its path percent-encoded (SQLite decodes it,
    and would stop it at a ``?`` or ``#``)."""
    from urllib.parse import quote

    return f"file:{quote(str(db_path), safe='/')}?mode=ro"


def mlflow_path(path: str | Path) -> str:
    """A local folder as MLflow is to be given it for artifacts: MLflow percent-decodes even a
    plain path when it opens it, so a ``%`` is written ``%25`` (nothing else changes)."""
    return str(path).replace("%", "%25")


def local_path(uri: str) -> Path | None:
    """The local file or folder an artifact location names, read as MLflow reads it (a plain path
    or a ``file:`` URI, percent-decoded), or None where it is not on this machine's disk."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return Path(unquote(parsed.path))
    if parsed.scheme == "":
        return Path(unquote(uri))
    return None


@dataclass(frozen=True)
class StoreLocation:
    """A resolved tracking store: its URI and, for an embedded store, its artifact root."""

    uri: str
    artifact_root: str | None = None

    @property
    def scheme(self) -> str:
        return self.uri.split(":", 1)[0].lower()

    @property
    def db_path(self) -> Path | None:
        """The SQLite file of an embedded store (None for a server or a database)."""
        return sqlite_path(self.uri) if self.is_sqlite else None

    def require(self) -> None:
        """For commands that only read: an embedded store that was never written is an error,
        not a new empty store left behind in the folder; a tracking server that does not answer
        is one line at once (MLflow's client would retry each request for minutes)."""
        from tracker.errors import NothingLoggedError

        if self.db_path is not None and not self.db_path.is_file():
            # a file in the way, or a folder named as the database, can never hold a store: not "nothing
            # logged yet", which says logging there would work (until 0.9.4)
            if self.db_path.is_dir():
                raise StoreError(f"{self.db_path} is a folder, not a tracking store's database file")
            if (blocked := next((p for p in self.db_path.parents if p.exists()), None)) is not None and not blocked.is_dir():
                raise StoreError(f"no tracking store at {self.db_path}: {blocked} is a file, not a folder")
            raise NothingLoggedError(f"no tracking store at {self.db_path}: nothing has been logged there yet")
        if self.db_path is not None:
            self._require_mlflow_tables(self.db_path)
        if self.is_http:
            from tracker.log.rest_store import check_reachable

            check_reachable(self.uri)

    def _require_mlflow_tables(self, db_path: Path) -> None:
        """Refuse, in one line, a file that is not an MLflow store: another file, or a SQLite
        database without MLflow's tables (MLflow's client, which fingerprint list and predict read
        through, gave a traceback on the first, and would make its tables in the second, until
        0.9.4). An empty file is a store nothing was logged to. Read-only, and a database that
        cannot be read now (locked) is left to what reads it next to say."""
        import sqlite3
        from contextlib import closing

        from tracker.errors import NothingLoggedError

        if db_path.stat().st_size == 0:
            raise NothingLoggedError(f"no tracking store at {db_path}: an empty file, nothing has been logged there yet")
        try:
            with closing(sqlite3.connect(sqlite_read_only(db_path), uri=True)) as conn:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise StoreError(f"{self.uri} is not an MLflow tracking store ({exc})") from None
            return
        if "experiments" not in tables:
            raise StoreError(f"{self.uri} is not an MLflow tracking store (a SQLite database without MLflow's tables)")

    @property
    def server_name(self) -> str:
        """A server's host, port and path as a file-name part (``127.0.0.1-5000``), never its
        credentials: what tells one server's default warehouse from another's."""
        import re
        from urllib.parse import urlsplit

        parts = urlsplit(self.uri)
        try:
            port = parts.port
        except ValueError:  # not a number: kept as written
            port = parts.netloc.rsplit(":", 1)[-1]
        host = (parts.hostname or "server").replace(":", "_")  # an IPv6 address keeps its colons apart
        name = f"{host}-{port or ''}-{parts.path}"
        return re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-.") or "server"

    @property
    def is_sqlite(self) -> bool:
        """An embedded store (a SQLite file), not a server or a database server."""
        return self.scheme == "sqlite"

    @property
    def is_http(self) -> bool:
        return self.scheme in ("http", "https")


def embedded_location(folder: Path | None = None) -> StoreLocation:
    folder = (folder or runs_dir()).resolve()
    return StoreLocation(uri=sqlite_uri(folder / "mlflow.db"), artifact_root=str(folder / "artifacts"))


def redacted(uri: str) -> str:
    """``uri`` with a password in it (a database's, ``postgresql://USER:PW@HOST/DB``) as ``***``:
    what messages, ``store info`` and a warehouse load's source name show."""
    from urllib.parse import urlparse

    password = urlparse(uri).password
    return uri.replace(f":{password}@", ":***@") if password else uri


def store_words(uri: str) -> list[str]:
    """The words that name the store at ``uri`` (a location's URI) in a command suggested to the
    user: none where a command given no ``--tracking-uri`` finds that store by itself (the default,
    or ``MLFLOW_TRACKING_URI``'s), else ``--tracking-uri`` and the store, an embedded store by its
    folder, a password as ``***``. A suggested command named no store until 0.9.10, so after
    ``tracker --tracking-uri X demo`` its next steps read the default store. Ask it before MLflow's
    ``set_tracking_uri`` runs in this process (training or loading a fingerprint): that sets
    ``MLFLOW_TRACKING_URI`` to the store, which would then read as the one a command finds by itself."""
    try:
        if resolve_location(None).uri == uri:
            return []
    except StoreError:  # MLFLOW_TRACKING_URI names no store a command could open: name this one
        pass
    shown = redacted(uri)
    if shown.startswith("sqlite:///") and (db := sqlite_path(shown)).name == "mlflow.db" and "?" not in shown:
        shown = str(db.parent)  # tracker's own layout: its folder, as it is given
    return ["--tracking-uri", shown]


def resolve_location(tracking_uri: str | None = None) -> StoreLocation:
    """Turn what the user gave (or nothing) into a store location. A URI malformed on its face is a
    :class:`~tracker.errors.TrackingUriError` (a usage error where the command line gave it); whether
    the store is there or reachable is asked later (:meth:`StoreLocation.require`)."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or ""
    if not uri:
        return embedded_location()
    if not uri.strip():  # a store was made in a folder named " " until 0.9.8; an empty one is runs/
        raise TrackingUriError(f"a tracking URI needs a store, got {uri!r} (--tracking-uri or MLFLOW_TRACKING_URI): "
                               "a folder, sqlite:///PATH.db or http(s)://HOST:PORT; unset or empty, it is runs/")
    # A URI's scheme leads it; a path with a colon later in it (``/data/run 12:30``) is a folder.
    scheme = uri.split(":", 1)[0].lower() if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", uri) else ""
    if scheme in ("http", "https") and "@" in uri.partition("://")[2].partition("/")[0]:
        # said in messages and kept in the outbox (since 0.9.2 refused, as the README always had it)
        raise TrackingUriError("the tracking URI carries credentials: give them as MLFLOW_TRACKING_USERNAME and "
                               "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN), never in the URI")
    if scheme in ("http", "https") and not uri.partition("://")[2].partition("/")[0]:
        # "cannot reach tracking server http::" (its slashes stripped) until 0.9.4
        raise TrackingUriError(f"tracking URI {uri!r} names no server: {scheme}://HOST:PORT")
    if scheme in ("http", "https", "postgresql", "postgresql+psycopg2", "mysql", "mssql"):
        return StoreLocation(uri=uri.rstrip("/"))
    if scheme == "sqlite":
        rest = uri.partition(":")[2]
        named = rest.lstrip("/").split("?", 1)[0]
        if not named or named == ":memory:":  # a file "sqlite:" or ":memory:" was made until 0.9.2
            raise TrackingUriError(f"tracking URI {uri!r} names no database file: sqlite:///PATH.db (an in-memory "
                                   "database would keep nothing)")
        if not rest.startswith("///"):
            # sqlite://relative.db (a host's place) or sqlite:relative.db was taken for a path, a store made
            # at ./sqlite:/relative.db, until 0.9.7
            raise TrackingUriError(f"tracking URI {uri!r} is not a SQLite file's URI: sqlite:///PATH.db (three "
                                   "slashes, then a relative path) or sqlite:////ABSOLUTE/PATH.db")
        uri = f"sqlite:{rest}"  # SQLITE:///a.db: the scheme as sqlite_path reads it
        db_path = sqlite_path(uri).resolve()
        query = uri.partition("?")[2]  # SQLAlchemy's options (timeout=30): kept for the engine, not part of the path
        return StoreLocation(uri=sqlite_uri(db_path) + (f"?{query}" if query else ""),
                             artifact_root=str(db_path.parent / "artifacts"))
    if scheme in ("", "file"):
        # A folder is taken as an embedded store of tracker's own layout.
        folder = local_path(uri) if scheme == "file" else Path(uri)  # a file: URI is percent-encoded
        if folder is None:
            raise TrackingUriError(f"unsupported tracking URI {uri!r}: a file: URI must name a folder on this machine")
        if folder.suffix == ".db":
            db_path = folder.resolve()
            return StoreLocation(uri=sqlite_uri(db_path), artifact_root=str(db_path.parent / "artifacts"))
        return embedded_location(folder)
    raise TrackingUriError(
        f"unsupported tracking URI {uri!r}: use http(s)://HOST:PORT for a tracking server, "
        "sqlite:///PATH.db or a folder for an embedded store, or postgresql://... for a database"
    )
