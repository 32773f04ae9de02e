"""The SQL views of ``sql/``: one view per file, named after it, created in dependency order.

A file holds one plain ``SELECT`` (no templating) after a header of ``--`` comment lines;
the header becomes the view's comment, which ``tracker views`` lists. A view that names
another view is created after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.errors import StoreError, first_paragraph
from tracker.settings import project_dir


@dataclass(frozen=True)
class ViewFile:
    name: str
    comment: str
    body: str
    path: Path


def read_views(folder: Path | None = None) -> list[ViewFile]:
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
        if not sql.lower().startswith(("select", "with")):
            raise StoreError(f"{path.name}: a view file holds one SELECT after its header comment")
        if not header:
            raise StoreError(f"{path.name}: a view file starts with a header comment saying what it is")
        views.append(ViewFile(path.stem, " ".join(h for h in header if h), sql, path))
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
    """(Re)create every view of ``sql/`` on an open warehouse connection."""
    import duckdb

    names = []
    for view in dependency_order(read_views(folder)):
        try:
            con.execute(f'CREATE OR REPLACE VIEW "{view.name}" AS\n{view.body}')
            con.execute(f"COMMENT ON VIEW \"{view.name}\" IS '{view.comment.replace(chr(39), chr(39) * 2)}'")
        except duckdb.Error as exc:
            raise StoreError(f"sql/{view.path.name}: {first_paragraph(str(exc))}") from None
        names.append(view.name)
    return names
