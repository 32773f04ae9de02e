"""The SQL views of ``sql/``: one view per file, named after it, created in dependency order.

A file holds one plain ``SELECT`` (no templating) after a header of ``--`` comment lines;
the header becomes the view's comment, which ``tracker views`` lists. A view that names
another view is created after it.

A file may instead hold one table macro, ``CREATE MACRO name(parameters) AS TABLE SELECT ...``,
named after the file (since 0.9.10: ``measurement_labels_of`` and ``layer_labels_of``, the labels over
named experiments, which ``measurement_labels`` and ``layer_labels`` read): one SQL definition that a view reads and a query calls with
bound values. It is created before the views that name it, its header its comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.errors import StoreError, first_paragraph
from tracker.settings import project_dir


#: A table macro's file: its name and parameters, then its SELECT.
_MACRO = re.compile(r"create\s+(?:or\s+replace\s+)?macro\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(([^()]*)\)\s+as\s+table\s+",
                    re.IGNORECASE)


@dataclass(frozen=True)
class ViewFile:
    name: str
    comment: str
    body: str
    path: Path
    #: a table macro's parameters (``kind`` "macro"), which its body reads as names
    parameters: tuple[str, ...] = ()
    kind: str = "view"


def read_views(folder: Path | None = None) -> list[ViewFile]:
    """The views of ``sql/`` (its table macros apart: :func:`read_sql_files` has both)."""
    return [v for v in read_sql_files(folder) if v.kind == "view"]


def read_sql_files(folder: Path | None = None) -> list[ViewFile]:
    """Every view and table macro of ``sql/``, in file order."""
    folder = folder or project_dir("sql")
    views = []
    for path in sorted(folder.glob("*.sql")):
        text = path.read_text()
        header, body = [], []
        for line in text.splitlines():
            if not body and line.startswith("--"):
                header.append(line[2:].strip())
            elif line.strip() or body:
                body.append(line)
        sql = "\n".join(body).strip().rstrip(";").strip()
        kind, parameters = "view", ()
        if macro := _MACRO.match(sql):
            if macro[1] != path.stem:
                raise StoreError(f"{path.name}: a macro file holds the macro named after it ({path.stem}), "
                                 f"not {macro[1]}")
            kind, parameters, sql = "macro", tuple(p.strip() for p in macro[2].split(",") if p.strip()), sql[macro.end():]
        if not sql.lower().startswith(("select", "with")):
            raise StoreError(f"{path.name}: a view file holds one SELECT after its header comment (a macro file, "
                             f"CREATE MACRO {path.stem}(parameters) AS TABLE SELECT ...)")
        if not header:
            raise StoreError(f"{path.name}: a view file starts with a header comment saying what it is")
        views.append(ViewFile(path.stem, " ".join(h for h in header if h), sql, path, parameters, kind))
    return views


def dependency_order(views: list[ViewFile]) -> list[ViewFile]:
    by_name = {v.name: v for v in views}
    words = {v.name: set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", v.body)) for v in views}
    ordered: list[ViewFile] = []
    state: dict[str, int] = {}

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise StoreError(f"views refer to each other in a cycle: {' -> '.join((*trail, name))}")
        state[name] = 1
        for dep in sorted(words[name] & by_name.keys() - {name}):
            visit(dep, (*trail, name))
        state[name] = 2
        ordered.append(by_name[name])

    for v in views:
        visit(v.name, ())
    return ordered


def create_views(con: Any, folder: Path | None = None) -> list[str]:
    """(Re)create every view of ``sql/`` on an open warehouse connection, and the table macros they
    read (each before the views naming it); the views' names."""
    import duckdb

    names = []
    for view in dependency_order(read_sql_files(folder)):
        comment = view.comment.replace(chr(39), chr(39) * 2)
        try:
            if view.kind == "macro":
                con.execute(f'CREATE OR REPLACE MACRO "{view.name}"({", ".join(view.parameters)}) AS TABLE\n{view.body}')
                con.execute(f"COMMENT ON MACRO TABLE \"{view.name}\" IS '{comment}'")
                continue
            con.execute(f'CREATE OR REPLACE VIEW "{view.name}" AS\n{view.body}')
            con.execute(f"COMMENT ON VIEW \"{view.name}\" IS '{comment}'")
        except duckdb.Error as exc:
            raise StoreError(f"sql/{view.path.name}: {first_paragraph(str(exc))}") from None
        names.append(view.name)
    return names
