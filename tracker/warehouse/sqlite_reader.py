"""The embedded store's SQLite file read through ADBC in a child process.

``adbc-driver-sqlite`` links its own copy of SQLite (3.53 here), while MLflow, SQLAlchemy and
tracker's logger use Python's ``sqlite3`` (the system's, 3.40). Two copies of SQLite in one
process corrupt each other's locks on a shared database (https://www.sqlite.org/howtocorrupt.html,
section 2.2.1): POSIX locks belong to the process, so when one copy closes its file the other
copy's locks go with it. Another process then takes itself for the store's last user, checkpoints
and deletes the WAL, and what this process writes next lands in the deleted file, lost; a new
connection here reads "disk I/O error". A ``tracker warehouse load`` inside a process that had
used the store (the demo, a notebook, the test suite) did exactly that.

So the ADBC reads run in this child, which has no other SQLite. It opens the file read-only,
takes one query per line on stdin as JSON (``{"sql": ..., "params": [...]}``), writes each
result as an Arrow IPC file into a temporary folder the parent made and answers ``ok PATH`` or
``error MESSAGE`` on stdout. It ends, and removes the folder, when stdin closes (so also when
the parent dies). The parent maps each file (no copy), removes it, and removes the folder when
it closes the reader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracker.errors import StoreError, first_line
from tracker.settings import sqlite_read_only


class SqliteReader:
    """The parent's handle on the reading child: one query at a time, Arrow tables back."""

    def __init__(self, db_path: Path, name: str) -> None:
        self.name = name
        self.folder = Path(tempfile.mkdtemp(prefix="tracker-sqlite-read-"))
        self._stderr = tempfile.TemporaryFile()
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-m", "tracker.warehouse.sqlite_reader", str(db_path), str(self.folder)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )

    def query(self, sql: str, params: Sequence[Any] = ()) -> Any:
        import pyarrow as pa

        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise StoreError(f"reading {self.name} failed: its reader is closed")
        try:
            proc.stdin.write(json.dumps({"sql": sql, "params": list(params)}) + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        if not answer:
            raise StoreError(f"reading {self.name} failed: its reader process ended ({self._ended()})")
        status, _, rest = answer.rstrip("\n").partition(" ")
        if status != "ok":
            raise StoreError(f"reading {self.name} failed: {rest}")
        try:
            return pa.ipc.open_file(pa.memory_map(rest)).read_all()
        finally:
            os.unlink(rest)

    def _ended(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return f"exit {code}" + (f": {lines[-1]}" if lines else "")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            self._stderr.close()
            shutil.rmtree(self.folder, ignore_errors=True)


def _one_value(value: Any) -> Any:
    """A one-row Arrow array of a bound parameter. A string (a run id, the parameters there are)
    is built from its buffers: ``pa.array``'s first call imports pandas to look for its types,
    a quarter of a second of an incremental load."""
    import array

    import pyarrow as pa

    if not isinstance(value, str):
        return pa.array([value])
    data = value.encode()
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(array.array("i", [0, len(data)]).tobytes()),
                                                  pa.py_buffer(data)])


def _serve(db_path: str, folder: Path) -> int:
    import adbc_driver_manager as adbc
    import adbc_driver_sqlite
    import pyarrow as pa
    import pyarrow.ipc

    try:
        if not Path(db_path).is_file():
            print(f"error no SQLite file at {db_path}", flush=True)
            return 1
        try:
            database = adbc_driver_sqlite.connect(sqlite_read_only(Path(db_path)))
            conn = adbc.AdbcConnection(database)
        except Exception as exc:
            print(f"error {first_line(exc)}", flush=True)
            return 1
        for n, line in enumerate(sys.stdin):
            if not line.strip():
                continue
            path = folder / f"{n}.arrow"
            try:
                request = json.loads(line)
                stmt = adbc.AdbcStatement(conn)
                try:
                    stmt.set_sql_query(request["sql"])
                    stmt.prepare()
                    params = request["params"]
                    if params:
                        stmt.bind(pa.record_batch([_one_value(p) for p in params],
                                                  names=[str(i) for i in range(len(params))]))
                    handle, _ = stmt.execute_query()
                    with pa.RecordBatchReader.from_stream(handle) as reader, \
                            pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, reader.schema) as writer:
                        for batch in reader:
                            writer.write_batch(batch)
                    del handle  # the result stream is released before its statement
                finally:
                    stmt.close()
            except Exception as exc:
                path.unlink(missing_ok=True)
                print(f"error {first_line(exc)}", flush=True)
                continue
            print(f"ok {path}", flush=True)
        conn.close()
        database.close()
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], Path(sys.argv[2])))
