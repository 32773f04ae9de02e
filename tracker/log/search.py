"""Searches of a whole store through MLflow's client, whatever the number of its experiments.

``MlflowClient.search_experiments`` answers 1000 experiments a call unless told otherwise, the
newest first: a store of more had its oldest left out of every search of "any experiment" (until
0.9.8). And a run search binds each experiment id it is given as a variable of one SQL query,
which some databases bound (SQLite before 3.32.0: 999 variables; builds since: 32766 unless
raised; SQL Server: 2100), and some hosted servers refuse a search of many (MLflow issue #13590):
so a search of many experiments is made a few at a time. ``search_registered_models`` answers
100 models a call, by name: a store of more (a team's server, other projects' models beside the
fingerprints) had the fingerprints named after the hundredth left out of ``fingerprint list``,
``fingerprint promote`` and the report (until 0.9.33): every page is read. Model versions are
read all at once, page by page, and grouped by name: a search for one model's versions names it
in a filter, which MLflow could not parse where the name holds a quote (``o'brien``, another
project's model in a shared store), a traceback of ``fingerprint list`` until 0.9.33.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

#: The most experiment ids one run search is given (what a store of more is searched in chunks of).
EXPERIMENTS_PER_SEARCH = 100

#: The most experiments one ``search_experiments`` call is asked for (MLflow's SQL store takes up to 50000).
EXPERIMENTS_PER_PAGE = 1000

#: The most registered models one ``search_registered_models`` call is asked for (MLflow's most a call
#: is 1000; its default 100).
MODELS_PER_PAGE = 1000

#: The most model versions one ``search_model_versions`` call is asked for (MLflow's default, and its
#: SQL store's most 200,000).
VERSIONS_PER_PAGE = 10_000


def every_experiment(client: Any, view_type: int | None = None) -> list[Any]:
    """Every experiment of the store (active ones unless ``view_type`` says otherwise), page by page."""
    from mlflow.entities import ViewType

    return list(_pages(client.search_experiments,
                       view_type=ViewType.ACTIVE_ONLY if view_type is None else view_type,
                       max_results=EXPERIMENTS_PER_PAGE))


def _pages(search: Any, **kwargs: Any) -> Iterator[Any]:
    """What one of MLflow's paged searches (``search_experiments``, ``search_registered_models``,
    ...) finds with ``kwargs``, every page of it, in its order."""
    token = None
    while True:
        page = search(**kwargs, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def runs_of(client: Any, experiment_ids: Sequence[str], filter_string: str = "", view_type: int | None = None,
            page: int = 1000) -> Iterator[Any]:
    """Every run of ``experiment_ids`` that the filter matches (active ones unless ``view_type`` says
    otherwise), ``EXPERIMENTS_PER_SEARCH`` experiments a search, ``page`` runs a call."""
    from mlflow.entities import ViewType

    ids = [str(e) for e in experiment_ids]
    for start in range(0, len(ids), EXPERIMENTS_PER_SEARCH):
        yield from _pages(client.search_runs, experiment_ids=ids[start:start + EXPERIMENTS_PER_SEARCH],
                          filter_string=filter_string,
                          run_view_type=ViewType.ACTIVE_ONLY if view_type is None else view_type, max_results=page)


def every_registered_model(client: Any) -> list[Any]:
    """Every registered model of the store, by name, page by page."""
    return list(_pages(client.search_registered_models, max_results=MODELS_PER_PAGE))


def every_model_version(client: Any) -> dict[str, list[Any]]:
    """Every model version of the store, page by page, by registered model name, each model's in
    MLflow's order of a search (last updated first, then the newest version first)."""
    found: dict[str, list[Any]] = {}
    for version in _pages(client.search_model_versions, max_results=VERSIONS_PER_PAGE):
        found.setdefault(version.name, []).append(version)
    return found


def registered_models(client: Any) -> list[Any]:
    """Every registered model with its aliases and versions (``tracker.log.store.RegisteredModel``),
    read through MLflow's client: what ``SqlStore.registered_models`` reads from a database store."""
    from tracker.log.store import RegisteredModel, RegisteredVersion

    versions = every_model_version(client)
    return [RegisteredModel(model.name, {str(a): str(v) for a, v in (model.aliases or {}).items()},
                            [RegisteredVersion(str(v.version), dict(v.tags or {}), v.creation_timestamp)
                             for v in versions.get(model.name, [])])
            for model in every_registered_model(client)]
