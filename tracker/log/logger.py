"""RunLogger: the one entry point profilers use to record measurements.

    logger = RunLogger(tracking_uri=None, experiment="my-campaign")
    if record.config_key not in logger.measured():
        logger.log([network_record, *layer_records])

Records are all validated before any is written (a batch with one bad record writes
nothing), then written by the store's fast writer.
"""

from __future__ import annotations

import contextlib
import getpass
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracker.console import counted
from tracker.errors import ExperimentDeletedError, NothingLoggedError, StoreError

from tracker.log.record import KEY_TAG, KIND_TAG, FinalRecord, RunRecord
from tracker.log.outbox import batch_name, mark_batch, outbox_dir, spool, spooled_keys, spooled_run
from tracker.log.schema import KINDS
from tracker.log.store import Experiment, Store, open_store
from tracker.settings import DEFAULT_EXPERIMENT, StoreLocation, resolve_location


#: Why a journalled batch is in the outbox: its writer was killed before the server had it all.
CUT_SHORT = "its write to the server was cut short (the process writing it was killed)"
INTERRUPTED = "its write to the server was interrupted"
#: The figures a lost batch's error line still gives of each network or training run it held.
SHOWN_LOST = ("latency_ms", "latency_ci_rel", "peak_mem_mb", "power_w")


class RunLogger:
    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str = DEFAULT_EXPERIMENT,
        environment: dict[str, str] | None = None,
        create: bool = True,
    ) -> None:
        """``create``: make the experiment where the store has none of that name (a command that
        measures); otherwise a missing experiment is a StoreError (a command that only reads)."""
        self.location: StoreLocation = resolve_location(tracking_uri)
        self.experiment_name = experiment
        self._create = create
        self._environment = environment
        #: why the tracking server cannot be used now (runs then go to the outbox)
        self.offline: str | None = None
        #: the ids of the runs this logger left in the outbox, for `tracker sync` (said in JSON as ``in_outbox``)
        self.outboxed: set[str] = set()
        self._warned = False
        self._store: Store | None = None
        self._experiment: Experiment | None = None
        try:
            self._online()
        except (NothingLoggedError, ExperimentDeletedError):  # the server answered: no such experiment (a command
            raise                                             # that only reads), or it is deleted
        except StoreError as exc:
            if not self.location.is_http:
                raise
            self.offline = str(exc)
        if self.offline is None and create:
            self._say_waiting()

    def _say_waiting(self) -> None:
        """Warn once that runs for this store wait in the outbox (a write to a server cut short, a server
        that was down, an embedded store's full disk): measuring goes on, and counts them as measured,
        but the store lacks them until `tracker sync`."""
        if not any(outbox_dir().glob("*.json")):
            return
        from tracker.log.outbox import pending, strip_credentials

        try:
            waiting = [item for item in pending() if item.uri == strip_credentials(self.location.uri)
                       and not item.being_written()]
        except StoreError as exc:
            sys.stderr.write(f"warning: {exc}\n")
            return
        if waiting:
            runs = sum(len(item.records) for item in waiting)
            sys.stderr.write(f"warning: {counted(runs, 'run')} for this store wait in the outbox "
                             f"{outbox_dir()}: `tracker sync` sends them\n")

    def _online(self) -> Store:
        """The store, (re)connecting first if the server could not be reached before."""
        if self._store is None:
            store = open_store(self.location)
            try:
                self._experiment = store.experiment(self.experiment_name, create=self._create)
            except BaseException:
                store.close()
                raise
            self._store = store
            self.offline = None
        return self._store

    def describe_experiment(self, text: str) -> None:
        """Describe the experiment in the MLflow UI (a campaign's ``description``); where the server
        cannot be reached now, nothing: the runs go to the outbox and the description waits for the
        next campaign run."""
        if self.offline is not None:
            return
        try:
            self._online().describe_experiment(self.experiment, text)
        except StoreError as exc:
            if not self.location.is_http:
                raise
            self.offline = str(exc)

    def require_artifacts_here(self) -> None:
        """Refuse, before anything is measured, an embedded store moved or copied from elsewhere
        (its artifacts would go to the old folder): see :mod:`tracker.log.relocate`."""
        if self._experiment is not None:  # an unreachable server has none; a server keeps its own paths
            from tracker.log.relocate import require_here

            require_here(self.location, self._experiment.artifact_location)

    @property
    def store(self) -> Store:
        if self._store is None:
            raise StoreError(self.offline or "no tracking store")
        return self._store

    @property
    def experiment(self) -> Experiment:
        if self._experiment is None:
            raise StoreError(self.offline or "no tracking store")
        return self._experiment

    @property
    def environment(self) -> dict[str, str]:
        if self._environment is None:
            from tracker.environment import capture_environment

            self._environment = capture_environment()
        return self._environment

    def finalize(self, records: Iterable[RunRecord], environment: dict[str, str] | None = None) -> list[FinalRecord]:
        env = {**(self.environment if environment is None else environment), "mlflow.user": _user()}
        return [r.finalize(env) for r in records]

    def log(self, records: Iterable[RunRecord], environment: dict[str, str] | None = None) -> list[str]:
        """Validate and write the records; returns their run ids (also set on the records).

        ``environment`` replaces this machine's for records measured elsewhere (imports).
        """
        records = list(records)
        final = self.finalize(records, environment)
        if self.location.is_http:
            # Journalled first: a process killed while it writes leaves the batch in the outbox.
            batch = batch_name()
            mark_batch(final, batch)
            try:
                journal: Path | None = spool(self.location.uri, self.experiment_name, final, CUT_SHORT, batch=batch,
                                             writer=True)
            except OSError:  # an outbox that cannot be written (a full disk): the server gets the batch all the same
                journal = None
            try:
                ids = self._online().write(self.experiment, final)
            except StoreError as exc:
                self.offline = str(exc)
                spool(self.location.uri, self.experiment_name, final, str(exc), batch=batch)
                self.outboxed.update(r.run_id for r in final)
                if not self._warned:
                    sys.stderr.write(f"warning: {exc}; runs go to the outbox {outbox_dir()} until `tracker sync`\n")
                    self._warned = True
                return [r.run_id for r in final]
            except BaseException as exc:  # interrupted: the batch waits in the outbox for `tracker sync`
                written: dict[str, str] = getattr(exc, "written", {})
                if final and all(r.run_id in written for r in final):
                    # unless the write finished all the same (a Ctrl-C while the server took the last runs):
                    # the batch is the server's, not the outbox's (said to wait there, and `sync` found it
                    # "already on the server", until 0.9.8); the records carry the server's ids
                    if journal is not None:
                        with contextlib.suppress(OSError):
                            journal.unlink(missing_ok=True)
                    for record, r in zip(records, final):
                        record.run_id = written[r.run_id]
                    exc.logged = [record.run_id for record in records]  # type: ignore[attr-defined]  # for the caller
                    raise
                if journal is not None:
                    with contextlib.suppress(OSError):
                        spool(self.location.uri, self.experiment_name, final, INTERRUPTED, batch=batch)
                raise
            if journal is not None:
                journal.unlink(missing_ok=True)
            for record, run_id in zip(records, ids):
                record.run_id = run_id
        else:
            from tracker.errors import signals_deferred

            # a Ctrl-C (or SIGTERM) while the store takes the batch is acted on once it has it whole, the
            # records carrying their ids and the exception saying so (``logged``, as a server's): it
            # rolled the write back until 0.9.8 (an interrupted job's KILLED run, its steps, lost to a
            # second Ctrl-C, as the command said "what was logged before is kept")
            whole = False
            try:
                with signals_deferred():
                    try:
                        ids = self.store.write(self.experiment, final)
                    except (StoreError, OSError) as exc:  # a full disk, a database locked past its wait
                        ids = self._keep_unwritten(final, exc)
                    for record, run_id in zip(records, ids):
                        record.run_id = run_id
                    whole = not self.outboxed.intersection(ids)
            except KeyboardInterrupt as exc:
                if whole:
                    exc.logged = list(ids)  # type: ignore[attr-defined]  # for the caller
                raise
        return ids

    def _keep_unwritten(self, final: list[FinalRecord], exc: Exception) -> list[str]:
        """An embedded store that could not take a batch (its disk full, its database locked past the
        wait; until 0.9.1 the measurement was lost, with a traceback): the batch goes to the outbox,
        which `tracker sync` writes to the store once it can; where the outbox cannot be written
        either (the same full disk), the StoreError's one line says what is lost, with its figures."""
        from tracker.errors import os_reason

        what = f"cannot write to {self.location.uri} ({os_reason(exc)})" if isinstance(exc, OSError) else str(exc)
        runs = counted(len(final), "run")
        try:
            spool(self.location.uri, self.experiment_name, final, f"the store could not take it: {what}")
        except OSError as again:
            figures = "; ".join(f"{r.name}: {', '.join(f'{k} {r.metrics[k]:.4g}' for k in SHOWN_LOST if k in r.metrics)}"
                                for r in final if r.tags.get(KIND_TAG) in ("network", "training") and r.metrics)
            raise StoreError(f"{what}; nor to the outbox {outbox_dir()} ({os_reason(again)}): {runs} not kept"
                             + (f"; measured {figures}" if figures else "")) from None
        self.outboxed.update(r.run_id for r in final)
        if not self._warned:
            sys.stderr.write(f"warning: {what}; {runs} wait{'s' if len(final) == 1 else ''} in the outbox "
                             f"{outbox_dir()} until `tracker sync`\n")
            self._warned = True
        return [r.run_id for r in final]

    def measured(self, kind: str | None = None, statuses: tuple[str, ...] = ("FINISHED",), tag: str = KEY_TAG,
                 having: str | None = None) -> set[str]:
        """Config keys (or another key ``tag``) already measured in this experiment (FINISHED
        ones unless told otherwise; with ``having``, of runs carrying that tag too)."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        # and what waits in the outbox for this store (a server down, a write cut short; since 0.9.1 an
        # embedded store's full disk)
        waiting = spooled_keys(self.location.uri, self.experiment_name, kind, statuses, tag=tag, having=having)
        if not self.location.is_http:
            return self.store.measured_keys(self.experiment, kind, statuses, tag, having) | waiting
        try:
            return self._online().measured_keys(self.experiment, kind, statuses, tag, having) | waiting
        except StoreError as exc:
            self.offline = str(exc)
            return waiting

    def find(self, config_key: str, status: str = "FINISHED", having_metric: str | None = None) -> RunRecord | None:
        """The newest run with this config key and status (that logged the metric ``having_metric``,
        if given), read back as a record, or None: the store's, or one waiting in the outbox for it (a
        server down answered none until 0.9.3, and a configuration measured while it was down was
        measured again)."""
        found = self.store.find_run(self.experiment, config_key, status, having_metric) if self.offline is None else None
        if found is None:
            found = spooled_run(self.location.uri, self.experiment_name, config_key, status, having_metric=having_metric)
            if found is None:
                return None
            self.outboxed.add(found.run_id)  # a reused run that waits there too
        return as_record(found)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_record(found: Any) -> RunRecord:
    """A run read back (a stored run, or a record waiting in the outbox) as a record."""
    record = RunRecord(kind=found.tags.get(KIND_TAG, "network"), name=found.name, params=dict(found.params),
                       metrics=dict(found.metrics))
    record.tags, record.status, record.run_id = dict(found.tags), found.status, found.run_id  # type: ignore[assignment]
    return record


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"
