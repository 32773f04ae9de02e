"""The warehouse's tables: DDL of the long tables, and typed tables generated from schemas/.

Long tables keep every value as MLflow stored it (``params``, ``tags``, ``metrics``), so
nothing is lost and incremental loads can delete and re-insert one run at a time. The
typed tables, one per run kind (``network_runs``, ``layer_runs``, ...), have a column per
field of ``schemas/<kind>.json`` with its proper type: params cast from text (int ->
BIGINT, float -> DOUBLE, bool -> BOOLEAN, str -> VARCHAR), metrics as DOUBLE under their
unit-bearing names. ``environments`` holds each run's ``env.*`` tags the same way.
"""

from __future__ import annotations

from tracker.log.schema import KINDS, FieldSpec, load_schema

SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "str": "VARCHAR"}

BASE_DDL = (
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY,
        experiment_id VARCHAR,
        experiment VARCHAR,
        run_name VARCHAR,
        kind VARCHAR,
        schema_version INTEGER,
        status VARCHAR,
        failure_reason VARCHAR,
        parent_run_id VARCHAR,
        config_key VARCHAR,
        campaign VARCHAR,
        source VARCHAR,
        start_time TIMESTAMP,
        end_time TIMESTAMP,
        start_time_ms BIGINT,
        end_time_ms BIGINT,
        artifact_uri VARCHAR,
        description_artifact VARCHAR,
        change_token VARCHAR
    )""",
    # Warehouses made before the change token: the column is added, every run reloads once.
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS change_token VARCHAR",
    "CREATE TABLE IF NOT EXISTS params (run_id VARCHAR, key VARCHAR, value VARCHAR)",
    "CREATE TABLE IF NOT EXISTS tags (run_id VARCHAR, key VARCHAR, value VARCHAR)",
    "CREATE TABLE IF NOT EXISTS metrics (run_id VARCHAR, key VARCHAR, value DOUBLE, step BIGINT, timestamp_ms BIGINT)",
    """CREATE TABLE IF NOT EXISTS network_nodes (
        model_hash VARCHAR, model VARCHAR, node_index INTEGER, name VARCHAR, op VARCHAR, kind VARCHAR,
        category VARCHAR, inputs INTEGER, in_shape VARCHAR, out_shape VARCHAR, out_channels BIGINT,
        out_h BIGINT, out_w BIGINT, kernel_h INTEGER, kernel_w INTEGER, stride_h INTEGER, stride_w INTEGER,
        padding INTEGER, dilation INTEGER, groups BIGINT, params BIGINT, macs BIGINT, flops BIGINT,
        elementwise_ops BIGINT, weight_bytes BIGINT, activation_in_bytes BIGINT, activation_out_bytes BIGINT,
        bytes_read BIGINT, bytes_written BIGINT, saved_activation_bytes BIGINT, target VARCHAR,
        kept_activation_bytes BIGINT, live_activation_bytes BIGINT
    )""",
    # Warehouses made before module targets: old node rows keep NULL (layers match them by name).
    "ALTER TABLE network_nodes ADD COLUMN IF NOT EXISTS target VARCHAR",
    # Warehouses made before kept activation bytes, or live ones (0.7.9): the columns are added, and
    # ensure_tables makes the load a full one (their node rows are of another NODE_ROWS_VERSION).
    "ALTER TABLE network_nodes ADD COLUMN IF NOT EXISTS kept_activation_bytes BIGINT",
    "ALTER TABLE network_nodes ADD COLUMN IF NOT EXISTS live_activation_bytes BIGINT",
    # The version of the feature code that computed network_nodes' rows (describe.features.
    # NODE_ROWS_VERSION; since 0.8.0, one row): another one's rows are computed again.
    "CREATE TABLE IF NOT EXISTS node_rows_version (version INTEGER)",
    """CREATE TABLE IF NOT EXISTS network_descriptions (
        model_hash VARCHAR PRIMARY KEY, model VARCHAR, input_size INTEGER, in_channels INTEGER,
        nodes INTEGER, edges INTEGER, run_id VARCHAR
    )""",
    # torch.profiler's operator table of each traced run (profile --trace; tracker.profile.trace),
    # per operator and per iteration: read from the run's trace/ops.json artifact.
    """CREATE TABLE IF NOT EXISTS trace_ops (
        run_id VARCHAR, op VARCHAR, calls_per_iter DOUBLE, self_cpu_ms DOUBLE, cpu_total_ms DOUBLE,
        self_device_ms DOUBLE, share_pct DOUBLE, time_basis VARCHAR, iterations INTEGER
    )""",
    # On a GPU, the kernels (and copies) of that trace (since tracker 0.7.3): the device's own view.
    """CREATE TABLE IF NOT EXISTS trace_kernels (
        run_id VARCHAR, kernel VARCHAR, calls_per_iter DOUBLE, self_device_ms DOUBLE, share_pct DOUBLE,
        iterations INTEGER
    )""",
    """CREATE TABLE IF NOT EXISTS loads (
        loaded_at TIMESTAMP, source VARCHAR, mode VARCHAR, runs_total BIGINT, runs_changed BIGINT,
        runs_deleted BIGINT, descriptions_added BIGINT, seconds DOUBLE
    )""",
)

#: Columns every typed table starts with, taken from ``runs``.
RUN_COLUMNS = ("run_id", "experiment", "run_name", "status", "failure_reason", "parent_run_id", "config_key",
               "campaign", "source", "start_time", "end_time")
RUN_COLUMN_TYPES = {"start_time": "TIMESTAMP", "end_time": "TIMESTAMP"}
#: Tags whose typed column is named and typed otherwise than the tag (``tracker.`` taken off, the
#: schema's type): the speed probe's version (``tracker.profile.probe.PROBE_TAG``), an integer
#: under the name that says what it is (since 0.9.11; column ``speed_probe``, text, before).
TAG_COLUMNS: dict[str, tuple[str, str]] = {"tracker.speed_probe": ("speed_probe_version", "INTEGER")}


def table_name(kind: str) -> str:
    return f"{kind}_runs"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _cast(spec: FieldSpec, value: str) -> str:
    sql_type = SQL_TYPES.get(spec.type, "VARCHAR")
    return value if sql_type == "VARCHAR" else f"TRY_CAST({value} AS {sql_type})"


def typed_columns(kind: str) -> list[tuple[str, str, str]]:
    """(column, SQL type, origin) of a kind's typed table, origin params/metrics/tags."""
    schema = load_schema(kind)
    cols: list[tuple[str, str, str]] = [(c, RUN_COLUMN_TYPES.get(c, "VARCHAR"), "runs") for c in RUN_COLUMNS]
    taken = {c for c, _, _ in cols}
    for name, spec in schema.params.items():
        if name not in taken:
            cols.append((name, SQL_TYPES.get(spec.type, "VARCHAR"), "params"))
            taken.add(name)
    for name, spec in schema.metrics.items():
        if name not in taken:
            cols.append((name, "DOUBLE", "metrics"))
            taken.add(name)
    for name, spec in schema.tags.items():
        if name.startswith("tracker.") and name.removeprefix("tracker.") not in taken and name not in (
            "tracker.kind", "tracker.schema", "tracker.version", "tracker.config_key", "tracker.failure_reason",
            "tracker.campaign", "tracker.source", "tracker.stderr_tail", "tracker.description",
        ):
            column, sql_type = TAG_COLUMNS.get(name, (name.removeprefix("tracker."), SQL_TYPES.get(spec.type, "VARCHAR")))
            if column in taken:
                continue
            cols.append((column, sql_type, "tags"))
            taken.add(column)
    return cols


def typed_ddl(kind: str) -> str:
    body = ",\n    ".join(f"{_quote(c)} {t}" for c, t, _ in typed_columns(kind))
    return f"CREATE TABLE IF NOT EXISTS {table_name(kind)} (\n    {body}\n)"


def typed_insert(kind: str) -> str:
    """INSERT of the typed rows of this kind's runs listed in the temp table ``changed``."""
    schema = load_schema(kind)
    columns = typed_columns(kind)
    selects = []
    for column, sql_type, origin in columns:
        if origin == "runs":
            selects.append(f"r.{_quote(column)}")
        elif origin == "params":
            selects.append(f"{_cast(schema.params[column], f'p.{_quote(column)}')} AS {_quote(column)}")
        elif origin == "metrics":
            selects.append(f"m.{_quote(column)}")
        else:
            value = f"t.{_quote(column)}"
            selects.append((f"TRY_CAST({value} AS {sql_type})" if sql_type != "VARCHAR" else value)
                           + f" AS {_quote(column)}")

    def pivot(table: str, names: list[str], alias_of: dict[str, str] | None = None) -> str:
        alias_of = alias_of or {}
        if not names:
            return "(SELECT run_id FROM changed)"
        cols = ", ".join(
            f"any_value(value) FILTER (WHERE key = {_literal(alias_of.get(n, n))}) AS {_quote(n)}" for n in names
        )
        return (f"(SELECT run_id, {cols} FROM {table} WHERE run_id IN (SELECT run_id FROM changed) "
                f"GROUP BY run_id)")

    params = [c for c, _, o in columns if o == "params"]
    metrics = [c for c, _, o in columns if o == "metrics"]
    tags = [c for c, _, o in columns if o == "tags"]
    tag_of = {column: name for name, (column, _) in TAG_COLUMNS.items()}
    return (
        f"INSERT INTO {table_name(kind)} BY NAME\nSELECT {', '.join(selects)}\nFROM runs r\n"
        f"LEFT JOIN {pivot('params', params)} p USING (run_id)\n"
        f"LEFT JOIN {pivot('metrics', metrics)} m USING (run_id)\n"
        f"LEFT JOIN {pivot('tags', tags, {t: tag_of.get(t, f'tracker.{t}') for t in tags})} t USING (run_id)\n"
        f"WHERE r.kind = {_literal(kind)} AND r.run_id IN (SELECT run_id FROM changed)"
    )


def environment_columns() -> list[tuple[str, str]]:
    """(column, SQL type) of ``environments``: each ``env.*`` tag of the common schema."""
    schema = load_schema("network")
    return [(n.removeprefix("env."), SQL_TYPES.get(s.type, "VARCHAR")) for n, s in schema.tags.items() if n.startswith("env.")]


def environment_ddl() -> str:
    body = ", ".join(f"{_quote(c)} {t}" for c, t in environment_columns())
    return f"CREATE TABLE IF NOT EXISTS environments (run_id VARCHAR, {body})"


def environment_insert() -> str:
    cols = []
    for column, sql_type in environment_columns():
        value = f"any_value(value) FILTER (WHERE key = {_literal('env.' + column)})"
        cols.append((value if sql_type == "VARCHAR" else f"TRY_CAST({value} AS {sql_type})") + f" AS {_quote(column)}")
    return (f"INSERT INTO environments BY NAME SELECT run_id, {', '.join(cols)} FROM tags "
            f"WHERE run_id IN (SELECT run_id FROM changed) GROUP BY run_id")


def generated_columns() -> dict[str, list[str]]:
    """Column names of the tables generated from schemas/ (typed tables and ``environments``): what
    a warehouse made by another version of tracker may lack."""
    return {"environments": ["run_id", *(c for c, _ in environment_columns())],
            **{table_name(k): [c for c, _, _ in typed_columns(k)] for k in KINDS}}


def all_ddl() -> list[str]:
    return [*BASE_DDL, environment_ddl(), *(typed_ddl(k) for k in KINDS)]


TABLES = ("runs", "params", "tags", "metrics", "environments", "network_nodes", "network_descriptions", "trace_ops", "trace_kernels",
          "loads",
          *(table_name(k) for k in KINDS))
