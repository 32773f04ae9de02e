"""Predicting a network that was never run, from the champions of the registry."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.console import decimal_number, shell_line, shell_word, whole_number
from tracker.decode import loads_json
from tracker.describe.features import BATCH_ANYWHERE_VERSION, NODE_ROWS_VERSION, counted_anew, counted_otherwise
from tracker.fingerprint.dataset import (
    TARGETS,
    FingerprintError,
    configuration_rows,
    feature_columns,
    outside_ranges,
    parse_ranges,
    scratch_warehouse,
)
from tracker.fingerprint.runtime import UnreadableTagError, capped, floor_columns, floored, memory_floor_mb
from tracker.fingerprint.train import champion_version, registered_name


@dataclass
class Champion:
    name: str
    version: str
    features: list[str]
    booster: Any
    method: str = "network"  # or "layer" / "blend" (see fingerprint.train)
    layer: Any = None  # fingerprint.layers.LayerModel when the method uses layers
    trend: Any = None  # fingerprint.trend.Trend under the booster, when the version has one
    ranges: dict[str, list[float]] = field(default_factory=dict)  # trained_ranges (none on older versions)
    device_memory_mb: float | None = None  # a memory target's device memory, where its runs recorded it
    largest_peak_mb: float | None = None  # a memory target's largest measurement learnt from
    # a memory target's floor, where its version keeps one (runtime.floor_columns): its predictions
    # are raised to it (runtime.floored)
    floor_columns: tuple[str, ...] | None = None
    # describe.features.NODE_ROWS_VERSION of the features it learnt from (tag node_rows_version,
    # since 0.8.0; None before)
    node_rows_version: int | None = None
    # what its runs were measured on (tags ``devices`` and ``mode``, since 0.8.9; None before): a
    # run's ``device`` (cpu, cuda:0, jetson-tx2 for perf4sight's imports) and the device mode id
    devices: tuple[str, ...] | None = None
    mode: str | None = None
    # a latency version's reference speed (tag speed_reference_ms, since 0.9.9): its labels were put at the
    # speed probe's time of the machine's median speed over its runs, and so are its predictions; None: as measured
    speed_reference_ms: float | None = None
    # the version of the speed probe whose time that reference is (tag speed_probe_version, written with it since
    # 0.9.9; None: not said, taken as this tracker's): another version's probe is another unit
    speed_probe_version: int | None = None

    def predict(self, rows: Any, layer_rows: Any = None, saturated: bool = True, network: Any = None) -> Any:
        """Predicted values for the view's ``rows``, through the layer-level model too when this
        champion's method uses it and ``layer_rows`` (``layer_features`` rows of them) are given.
        ``saturated`` False: what a memory target needs of the device, a hinge trend's past its
        ceiling (the readings saturate near a board's limit, the need does not), raised to the floor:
        what fit verdicts compare with the limits (the same values for any other trend). ``network``:
        :meth:`network_level` of these ``rows`` where the caller has it already."""
        from tracker.fingerprint.runtime import combined

        values = self.network_level(rows, saturated) if network is None else network
        if self.layer is not None and layer_rows is not None and not layer_rows.empty:
            summed = self.layer.network_latency(layer_rows).reindex(rows["run_id"]).to_numpy(float)
            values = combined(self.method, values, summed)
        if self.floor_columns:
            values = floored(values, rows, self.phase, self.floor_columns)
        return capped(self.target, values)

    def network_level(self, rows: Any, saturated: bool = True) -> Any:
        """The network-level part of :meth:`predict` (its booster and trend, in the target's unit, before
        the layer level, the floor and the cap), which reads the view's ``rows`` alone."""
        from tracker.fingerprint.runtime import network_values

        return network_values(self.booster, self.features, self.trend, rows, saturated=saturated)

    @property
    def target(self) -> str:
        """The target this champion predicts (its registered name is ``TARGET-PHASE-DEVICE``)."""
        return self.name.split("-", 1)[0]

    @property
    def phase(self) -> str:
        """The phase it predicts (from its registered name, ``TARGET-PHASE-DEVICE``)."""
        return self.name.split("-", 2)[1]


@dataclass(frozen=True)
class RegisteredVersion:
    """What loading a registered version needs of it, read straight from an embedded store's
    database (MLflow's ModelVersion has the same attributes); ``storage_location``: its model's folder."""

    name: str
    version: str
    run_id: str
    tags: dict[str, str]
    storage_location: str


def sqlite_champions(db: Path, names: Sequence[str]) -> dict[str, RegisteredVersion]:
    """The ``champion`` version of each registered name that has one in an embedded store's
    SQLite database, read with the standard library: a new process that predicts loads no MLflow
    (1.5 s of its 3.3). Empty where the database is not of the layout this reads (MLflow's
    client then answers, as for a server)."""
    return sqlite_versions(db, [(name, None) for name in names])


def sqlite_versions(db: Path, wanted: Sequence[tuple[str, str | None]]) -> dict[str, RegisteredVersion]:
    """Each ``(registered name, version)`` of ``wanted`` that the database has (a version None: the
    one the ``champion`` alias points at), by name, as :func:`sqlite_champions` reads them."""
    import sqlite3

    from tracker.fingerprint.served import version_number
    from tracker.fingerprint.train import CHAMPION

    if not db.is_file():
        return {}
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return {}
    found: dict[str, RegisteredVersion] = {}
    try:
        columns = {row[1] for row in con.execute("PRAGMA table_info(model_versions)")}
        if not {"name", "version", "run_id", "storage_location", "current_stage"} <= columns:
            return {}
        # MLflow 3.x keeps a workspace on each row ('default' unless workspaces are enabled)
        workspace = " AND workspace = 'default'" if "workspace" in columns else ""
        for name, number in wanted:
            if number is None:
                alias = con.execute("SELECT version FROM registered_model_aliases WHERE name = ? AND alias = ?"
                                    + workspace, (name, CHAMPION)).fetchone()
                if alias is None:
                    continue
                number = str(alias[0])
            if version_number(number) is None:  # the alias's, as the store keeps it
                continue
            row = con.execute("SELECT run_id, storage_location FROM model_versions WHERE name = ? AND version = ? "
                              "AND current_stage != 'Deleted_Internal'" + workspace, (name, int(number))).fetchone()
            if row is None or not row[1]:
                continue
            tags = dict(con.execute("SELECT key, value FROM model_version_tags WHERE name = ? AND version = ?"
                                    + workspace, (name, int(number))).fetchall())
            found[name] = RegisteredVersion(name, number, row[0] or "", tags, row[1])
    except sqlite3.Error:
        return {}
    finally:
        con.close()
    return found


def split_version(text: str) -> tuple[str, str]:
    """``NAME/VERSION`` (``latency_ms-inference-cpu/2``) as its name and number; anything else, a
    FingerprintError naming it (``NAME/2/3`` was read as a version 3 of ``NAME/2`` until 0.9.4)."""
    from tracker.fingerprint.served import VERSION_RULE, version_number

    name, sep, number = text.partition("/")
    version = version_number(number)
    if not sep or not name or version is None:
        raise FingerprintError(f"{text!r:.80}: expected a registered fingerprint and its version, NAME/VERSION "
                               f"(VERSION {VERSION_RULE}; tracker fingerprint list)")
    return name, str(version)


def registered_versions(tracking_uri: str | None, wanted: Sequence[str]) -> dict[str, Any]:
    """The registered versions named ``NAME/VERSION`` (``latency_ms-inference-cpu/2``), by name, not
    loaded; one the store lacks is a FingerprintError naming it."""
    from tracker.fingerprint.served import made_by_train
    from tracker.settings import resolve_location

    location = resolve_location(tracking_uri)
    location.require()
    pairs = [split_version(text) for text in wanted]
    found: dict[str, Any] = {}
    if location.is_sqlite and location.db_path is not None:
        found = sqlite_versions(location.db_path, pairs)
    missing = [(n, v) for n, v in pairs if n not in found]
    if missing:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        client = MlflowClient(location.uri)
        for name, number in missing:
            try:
                found[name] = client.get_model_version(name, number)
            except MlflowException:
                raise FingerprintError(f"no fingerprint {name} version {number} in this store "
                                       "(tracker fingerprint list)") from None
    for name, version in found.items():  # one registered otherwise was "cannot load its model ... moved?" until 0.9.2
        if not made_by_train(version.tags):
            raise FingerprintError(f"{name} version {version.version} was not registered by tracker fingerprint train "
                                   "(no features tag): tracker predict cannot use it")
    return found


def _local_fingerprint(version: Any) -> Any:
    """The version's fingerprint read from its model's folder on this machine, without MLflow, or
    None where it has none such (a server's, a cloud store's, a layout this does not know)."""
    from tracker.fingerprint.runtime import read_fingerprint
    from tracker.settings import local_path

    location = version.storage_location if isinstance(version, RegisteredVersion) else None
    if not location:
        return None
    # a plain path is percent-decoded too, as MLflow reads it: a store under /tmp/a%b keeps /tmp/a%25b (its
    # folder taken as written, "cannot load its model", until 0.9.8)
    folder = local_path(location)
    if folder is None:
        return None
    import yaml

    try:
        mlmodel = yaml.safe_load((folder / "MLmodel").read_text())
        artifacts = mlmodel["flavors"]["python_function"]["artifacts"]
        paths = {key: str(folder / entry["path"]) for key, entry in artifacts.items()}
    except (KeyError, TypeError, AttributeError, yaml.YAMLError):
        return None
    for path in paths.values():
        if not Path(path).is_file():
            raise FileNotFoundError(f"no such file: {path}")
    return read_fingerprint(paths)


def _damaged_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged model raises (evaluated as the error passes): LightGBM's own error too where its
    library was loaded to read it. A booster whose trees are walked in numpy never loads it (``TextBooster``)."""
    import sys

    errors: tuple[type[BaseException], ...] = (ValueError, KeyError, TypeError)
    if "lightgbm" in sys.modules:
        from lightgbm.basic import LightGBMError

        errors = (*errors, LightGBMError)
    return errors


def load_champion(tracking_uri: str, name: str, version: Any) -> Champion:
    """The model of a registered ``version`` (an MLflow ModelVersion, or a RegisteredVersion read
    from an embedded store's database), with its layer model if it has one."""
    from tracker.fingerprint.served import made_by_train, model_format

    where = f"{name} version {version.version}"
    if not made_by_train(version.tags):  # the alias moved by hand (the MLflow UI): "cannot load ... moved?" until 0.9.4
        raise FingerprintError(f"{where} was not registered by tracker fingerprint train (no features tag): tracker "
                               f"predict cannot use it; move the champion alias to one of train's (tracker "
                               f"fingerprint promote {shell_word(name)} VERSION)")
    try:
        if model_format(version.tags, where) != 1 and (read := _local_fingerprint(version)) is not None:
            champ = Champion(name, str(version.version), read.features, read.booster,
                             version.tags.get("method", "network"), read.layer, read.trend)
        else:
            champ = _mlflow_champion(tracking_uri, name, version)
    except FingerprintError:
        raise
    # a file there but damaged (a truncated fingerprint.json, a booster.txt that is not one): a traceback until 0.9.8
    except OSError as exc:
        raise _unloadable(where, exc) from None
    except _damaged_errors() as exc:
        raise _unloadable(where, exc, damaged=True) from None
    for attribute, value in read_tags(name, version).items():
        setattr(champ, attribute, value)
    if version.tags.get("devices"):
        champ.devices = tuple(version.tags["devices"].split(","))
    champ.mode = version.tags.get("mode") or None
    # a floor since 0.7.8 (older versions keep none); its columns since 0.7.9 (0.7.8's: FIRST_MEMORY_FLOOR_COLUMNS)
    if version.tags.get("memory_floor") == "true":
        recorded = version.tags.get("memory_floor_columns")
        champ.floor_columns = floor_columns(champ.phase, recorded.split(",") if recorded else True)
    if "trend" in version.tags and champ.trend is None:
        from tracker.fingerprint.runtime import Trend

        try:
            champ.trend = Trend.from_json(version.tags["trend"])
        except (ValueError, KeyError, TypeError) as exc:
            raise UnreadableTagError(f"{name} version {version.version}: unreadable trend tag ({exc}); "
                                     "retrain with tracker fingerprint train", "trend", version.tags["trend"]) from None
    return champ


def read_tags(name: str, version: Any) -> dict[str, Any]:
    """The values of a version's tags that predict reads beside its model (``Champion``'s attributes of the
    same names: its trained ranges, the node rows' and speed probe's versions, the device's memory, the
    largest peak and the reference speed it learnt); a FingerprintError naming the first that is unreadable."""
    read: dict[str, Any] = {}
    if "trained_ranges" in version.tags:
        try:
            read["ranges"] = parse_ranges(version.tags["trained_ranges"])
        except ValueError as exc:
            raise UnreadableTagError(f"{name} version {version.version}: unreadable trained_ranges tag: {exc}; "
                                     "retrain with tracker fingerprint train", "trained_ranges",
                                     version.tags["trained_ranges"]) from None
    # whole numbers: the node rows' version, and the speed probe's (read since 0.9.12: --speed-probe-ms is refused
    # across versions)
    for tag in ("node_rows_version", "speed_probe_version"):
        if tag in version.tags:
            # ASCII digits alone: int() read another script's (a tag edited to ٣ was 3) until 0.9.14
            if (number := whole_number(version.tags[tag])) is None:
                raise UnreadableTagError(f"{name} version {version.version}: unreadable {tag} tag "
                                         f"{version.tags[tag]!r} (expected a whole number); retrain with "
                                         "tracker fingerprint train", tag, version.tags[tag])
            read[tag] = number
    for tag in ("device_memory_mb", "largest_peak_mb", "speed_reference_ms"):
        if tag in version.tags:
            value = decimal_number(version.tags[tag])  # in ASCII alone (float() took ٣ as 3 until 0.9.14)
            if value is None or not (math.isfinite(value) and value > 0):  # a limit of NaN would let everything fit
                raise UnreadableTagError(f"{name} version {version.version}: unreadable {tag} tag "
                                         f"{version.tags[tag]!r} (expected {'ms' if tag.endswith('_ms') else 'MB'}, a "
                                         "positive number); retrain with tracker fingerprint train", tag,
                                         version.tags[tag])
            read[tag] = value
    return read


#: The most characters of why a version's model cannot be read that train's and promote's lines carry.
WHY_CHARS = 400


def _unloadable(where: str, exc: BaseException, damaged: bool = False) -> FingerprintError:
    """A version whose files cannot be read (a store moved or copied keeps their old paths), in a line."""
    from tracker.console import clipped
    from tracker.errors import first_line
    from tracker.fingerprint.runtime import UnloadableModelError

    # why, in the line train and promote say of it: whole up to WHY_CHARS (a path to the files; at 120 until 0.9.25,
    # cut mid-path), then marked cut
    if damaged:  # a file there but not readable as what it should be
        why = f"{type(exc).__name__}: {first_line(exc)}"
        return UnloadableModelError(f"{where}: cannot read its model from the store's artifacts ({why}); are they "
                                    f"damaged? Retrain with tracker fingerprint train, or make another version "
                                    f"champion (tracker fingerprint promote NAME VERSION)",
                                    f"its model cannot be read ({clipped(why, WHY_CHARS)})")
    return UnloadableModelError(f"{where}: cannot load its model from the store's artifacts ({first_line(exc)}); were "
                                "they moved or deleted? A moved store: tracker store relocate; else retrain with "
                                "tracker fingerprint train",
                                f"its model cannot be loaded ({clipped(first_line(exc), WHY_CHARS)})")


def _mlflow_champion(tracking_uri: str, name: str, version: Any) -> Champion:
    """A version's model loaded by MLflow (format 1's LightGBM flavour; a server's or another store's)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from tracker.fingerprint.served import model_format

    uri, where = f"models:/{name}/{version.version}", f"{name} version {version.version}"
    mlflow.set_tracking_uri(tracking_uri)
    try:
        if model_format(version.tags, where) == 1:
            booster = mlflow.lightgbm.load_model(uri)  # log(target); the trend, if any, in a tag (read by load_champion)
            champ = Champion(name, str(version.version), version.tags.get("features", "").split(","), booster,
                             version.tags.get("method", "network"))
            if champ.method != "network":  # format 1: the layer model is a run artifact
                champ.layer = _layer_model(tracking_uri, version.run_id)
            return champ
        # tracker.fingerprint.runtime's FingerprintModel. No requirement check: this is the environment that
        # reads the format (the check scans every installed distribution: 0.9 s of a 1 s load).
        served = mlflow.pyfunc.load_model(uri, suppress_warnings=True).unwrap_python_model()
    except MlflowException as exc:
        raise _unloadable(where, _gone_folder(tracking_uri, name, version) or exc) from None
    return Champion(name, str(version.version), served.features, served.booster,
                    version.tags.get("method", "network"), served.layer, served.trend)


def _gone_folder(tracking_uri: str, name: str, version: Any) -> FileNotFoundError | None:
    """Where a version's model folder is on this machine's disk and gone, that (MLflow says "No such artifact: ''"
    of it, which named nothing until 0.9.25); else None."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from tracker.settings import local_path

    try:
        folder = local_path(MlflowClient(tracking_uri).get_model_version_download_uri(name, str(version.version)))
    except MlflowException:
        return None
    return FileNotFoundError(f"no such folder: {folder}") if folder is not None and not folder.exists() else None


def champion_versions(tracking_uri: str | None, phase: str, device: str, targets: tuple[str, ...] = tuple(TARGETS),
                      dtype: str = "float32") -> dict[str, Any]:
    """The registered champion version (an MLflow ModelVersion, not loaded) of every target in
    ``targets`` (default: all) that has one for this phase, device and number format (``dtype``);
    none at all is an error."""
    from tracker.settings import resolve_location

    location = resolve_location(tracking_uri)  # a folder, as the CLI takes it, or None: the default store
    tracking_uri = location.uri
    location.require()
    if location.is_sqlite and location.db_path is not None:
        names = {target: registered_name(target, phase, device, dtype) for target in targets}
        read = sqlite_champions(location.db_path, list(names.values()))
        if read:
            return {target: read[name] for target, name in names.items() if name in read}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    found = {}
    for target in targets:
        version = champion_version(client, registered_name(target, phase, device, dtype))
        if version is not None:
            found[target] = version
    if not found:
        from tracker.log.search import every_registered_model

        known = sorted({m.name for m in every_registered_model(client)})
        which = "fingerprint" if set(targets) >= set(TARGETS) else f"{' or '.join(targets)} fingerprint"
        raise FingerprintError(f"no {which} for phase {phase!r} on device {device!r}"
                               + (f" in {dtype}" if dtype != "float32" else "") + "; registered: "
                               f"{', '.join(known) or 'none (run tracker fingerprint train)'}")
    return found


def latency_references(tracking_uri: str | None, device: str, mode: str | None = None) -> list[dict[str, Any]]:
    """The latency champions ``tracker predict ... --device DEVICE`` (or ``--device MODE``) loads, in
    either phase, float32, as ``tracker device speed`` compares them with the machine's speed now
    (since 0.9.11): each one's registered name, version, the mode its runs were measured in (tag
    ``mode``), the probe speed its labels were put at (tag ``speed_reference_ms``; None: it learnt
    as measured, or its tag is unreadable) and that probe's version (tag ``speed_probe_version``; None
    where it has none or it is unreadable), and ``unreadable_tags``: those two of its tags that it has
    and that are not what predict reads (a positive number of ms, a whole number), which predict refuses
    (since 0.9.12: a reference unread was said to be none, a version unread taken as this tracker's).
    Read from an embedded store's database without MLflow, else by MLflow's client."""
    from tracker.settings import resolve_location

    location = resolve_location(tracking_uri)
    location.require()
    names = [registered_name("latency_ms", phase, where) for where in dict.fromkeys((device, mode or device))
             for phase in ("inference", "training")]
    read: dict[str, Any] = {}
    if location.is_sqlite and location.db_path is not None:
        read = sqlite_champions(location.db_path, names)
    if not read and not (location.is_sqlite and location.db_path is not None and location.db_path.is_file()
                         and _registry_readable(location.db_path)):
        from mlflow.tracking import MlflowClient

        client = MlflowClient(location.uri)
        read = {name: version for name in names if (version := champion_version(client, name)) is not None}
    found = []
    for name in names:
        if (version := read.get(name)) is None:
            continue
        tags = version.tags
        reference, probe_version, unreadable = None, None, []
        if "speed_reference_ms" in tags:  # as load_champion reads it: a positive number of ms, else refused
            reference = decimal_number(tags["speed_reference_ms"])
            if reference is None or not (math.isfinite(reference) and reference > 0):
                reference = None
                unreadable.append("speed_reference_ms")
        if "speed_probe_version" in tags:  # the probe version of its reference (written with it since 0.9.9)
            if (probe_version := whole_number(tags["speed_probe_version"])) is None:
                unreadable.append("speed_probe_version")
        if reference is None or unreadable:  # no reference read, or one of an unread unit: none compared
            reference = probe_version = None
        found.append({"name": name, "version": str(version.version), "mode": tags.get("mode") or None,
                      "speed_reference_ms": reference, "speed_probe_version": probe_version,
                      "unreadable_tags": unreadable})
    return found


def _registry_readable(db: Path) -> bool:
    """Whether an embedded store's database has MLflow's registry tables as sqlite_versions reads
    them (so none found there is none registered, and MLflow's client need not be asked)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return {"model_versions", "registered_model_aliases", "model_version_tags"} <= tables


def load_champions(tracking_uri: str | None, versions: dict[str, Any]) -> dict[str, Champion]:
    """The models of :func:`champion_versions`' ``versions`` (exactly those versions, wherever the
    alias has moved since), with the feature SQL ready for the first prediction."""
    from tracker.settings import resolve_location

    tracking_uri = resolve_location(tracking_uri).uri  # a folder, as the CLI takes it
    found = {target: load_champion(tracking_uri, version.name, version) for target, version in versions.items()}
    scratch_warehouse()  # the feature SQL is part of the loaded model: ready before the first prediction
    return found


def champions(tracking_uri: str | None, phase: str, device: str, targets: tuple[str, ...] = tuple(TARGETS),
              dtype: str = "float32") -> dict[str, Champion]:
    """The champion of every target in ``targets`` (default: all) that has one for this phase,
    device and number format, loaded."""
    return load_champions(tracking_uri, champion_versions(tracking_uri, phase, device, targets, dtype))


def _layer_model(tracking_uri: str, run_id: str) -> Any:
    from tracker.fingerprint.runtime import LayerModel, read_booster
    from tracker.log.artifacts import downloaded

    with downloaded(tracking_uri, run_id, "evaluation/layer_model") as folder:  # the booster is read whole
        # damaged, a ValueError that load_champion says in a line; nested past the recursion limit it was a
        # RecursionError, and not an object an AttributeError, each a traceback until 0.9.15
        calibration = loads_json((folder / "calibration.json").read_bytes())
        if not isinstance(calibration, dict):
            raise ValueError("calibration.json is not a JSON object")
        return LayerModel.from_calibration(read_booster(str(folder / "booster.txt")), calibration)


#: Targets of one iteration that grow with the batch as the work does: past the largest batch a
#: version learnt (where trees answer as at that batch) they are scaled in proportion to it. A
#: device busy at that batch stays so: the work per image, and so its time and energy, stays.
#: Power and utilisation do not grow, and a peak memory has its own floor (runtime.floored). A
#: version with a trend under its trees is left to it.
PROPORTIONAL_TARGETS = ("latency_ms", "energy_per_iter_j")


def scaled_top_batch(champ: Champion, target: str | None = None) -> int | None:
    """The largest batch ``champ`` learnt where its ``target`` (default its own) is predicted past it
    at that batch and scaled by the batch (PROPORTIONAL_TARGETS, a version without a trend that
    records its span); None where it is not."""
    target = target or champ.target
    if target in PROPORTIONAL_TARGETS and champ.trend is None and "batch_size" in champ.ranges:
        return int(champ.ranges["batch_size"][1])
    return None


def at_batch(rows: Any, batch: int) -> Any:
    """Rows of the view (``measurement_features``) as its SQL makes them at another batch size:
    ``batch_size`` and each ``batch_X`` column, ``X`` (per sample) times the batch."""
    out = rows.copy()
    out["batch_size"] = batch
    for column in rows.columns:
        if column.startswith("batch_") and column != "batch_size" and column[len("batch_"):] in rows.columns:
            out[column] = rows[column[len("batch_"):]].to_numpy(float) * batch
    return out


def predicted_as_predict(champ: Champion, rows: Any, layer_rows_of: Callable[[Any], Any] | None = None) -> Any:
    """What ``tracker predict`` answers for rows of the view with ``champ`` (its target alone):
    its prediction, and past the largest batch it learnt (:func:`scaled_top_batch`) its prediction
    at that batch times the batch over it, as :func:`predict_grid` scales it. ``layer_rows_of(rows)``:
    their ``layer_features`` rows, for a version that uses them. (``fingerprint train`` compares its
    champion so: without the scaling until 0.9.8.)"""
    import numpy as np

    values = np.array(champ.predict(rows, layer_rows_of(rows) if layer_rows_of else None), dtype=float)
    top = scaled_top_batch(champ)
    batch = rows["batch_size"].to_numpy(float)
    if top is not None and (over := batch > top).any():
        at_top = at_batch(rows[over].reset_index(drop=True), top)
        values[over] = np.asarray(champ.predict(at_top, layer_rows_of(at_top) if layer_rows_of else None),
                                  float) * batch[over] / top
    return values


def predict_rows(models: dict[str, Champion], rows: Any, layer_rows: Any = None,
                 network: dict[str, Any] | None = None) -> list[dict[str, float]]:
    """Each row's prediction of every target of ``models``; ``network``: the champions' network-level
    values of these rows (``Champion.network_level``, by target) where the caller has them already."""
    out: list[dict[str, float]] = [{} for _ in range(len(rows))]
    for target, champ in models.items():
        values = champ.predict(rows, layer_rows, network=(network or {}).get(target))
        for i, v in enumerate(values):
            out[i][target] = float(v)
    return out


def predict(tracking_uri: str | None, ref: str, batch_size: int, phase: str, device: str, input_size: int | None = None,
            models: dict[str, Champion] | None = None, with_features: bool = False,
            dtype: str = "float32", speed_probe_ms: float | None = None,
            speed_probe_version: int | None = None) -> dict[str, Any]:
    """Predictions of every target with a champion; ``models`` (from :func:`champions`) saves
    loading them again when many networks are predicted (``speed_probe_ms`` and ``speed_probe_version``:
    see :func:`predict_grid`)."""
    return predict_many(tracking_uri, [ref], batch_size, phase, device, input_size, models,
                        with_features=with_features, dtype=dtype, speed_probe_ms=speed_probe_ms,
                        speed_probe_version=speed_probe_version)[0]


def predict_many(tracking_uri: str | None, refs: list[str], batch_size: int, phase: str, device: str,
                 input_size: int | None = None, models: dict[str, Champion] | None = None,
                 descriptions: list[Any] | None = None, with_features: bool = False,
                 dtype: str = "float32", speed_probe_ms: float | None = None,
                 speed_probe_version: int | None = None) -> list[dict[str, Any]]:
    """:func:`predict` of each network in ``refs``, in order, their features made in one pass of
    the feature SQL (``predict_ms`` is then each network's share of that pass and the boosters).
    ``descriptions``: the networks' ``Description``s where the caller has them already (``refs``
    are then neither read nor described again). ``with_features``: each result also holds its
    row's features (``features``: the input a registered version takes through MLflow; a value
    the description lacks is None)."""
    return predict_grid(tracking_uri, refs, [batch_size], phase, device, input_size, models, descriptions,
                        with_features, dtype, speed_probe_ms=speed_probe_ms, speed_probe_version=speed_probe_version)


def _model_refs(refs: list[str], input_size: int | None) -> list[Any]:
    """The networks ``refs`` name (``ModelRef``s), resolved and checked against ``input_size``: an
    unknown network, or an input size one cannot take, is said before anything is loaded."""
    from tracker.zoo import resolve
    from tracker.zoo.spec import check_input_size

    model_refs = [resolve(ref) for ref in refs]
    for model_ref in model_refs:
        check_input_size(model_ref, input_size)
    return model_refs


def predict_grid(tracking_uri: str | None, refs: list[str], batch_sizes: Sequence[int], phase: str, device: str,
                 input_size: int | None = None, models: dict[str, Champion] | None = None,
                 descriptions: list[Any] | None = None, with_features: bool = False,
                 dtype: str = "float32", progress: Callable[[int, int], None] | None = None,
                 speed_probe_ms: float | None = None, speed_probe_version: int | None = None) -> list[dict[str, Any]]:
    """:func:`predict_many` at each of ``batch_sizes``: one result per network and batch size,
    network by network in the order of ``refs``, each network's batch sizes in the order given (a
    batch size given twice is predicted once). The champions are loaded and each network described
    once, and all configurations share one pass of the feature SQL. ``progress(done, total)`` is
    called as each network is described (a network not described before takes up to a second or two).
    ``speed_probe_ms``: the latency of a version that learnt at a reference speed (``speed_reference_ms``)
    at the machine's speed when the speed probe took that long instead (a run's ``speed_probe_ms``):
    scaled by it over the reference. It is a time of this tracker's probe (``PROBE_VERSION``, what ``tracker
    device speed`` times), or of ``speed_probe_version``'s where given (a run's): a version whose reference is
    another probe version's time is another unit, and is refused (a FingerprintError, before any network is
    described; rescaled across the two until 0.9.12)."""
    from tracker.describe import described
    from tracker.fingerprint.runtime import LAYER_INPUTS, LAYERS

    if descriptions is not None and len(descriptions) != len(refs):
        raise ValueError(f"{len(descriptions)} descriptions for {len(refs)} networks")
    check_speed_probe_ms(speed_probe_ms)  # before anything is loaded (after the predictions until it was released)
    sizes = list(dict.fromkeys(int(bs) for bs in batch_sizes))
    if not sizes or min(sizes) < 1:
        raise FingerprintError(f"batch sizes must be whole numbers of at least 1, got {list(batch_sizes)}")
    model_refs = _model_refs(refs, input_size) if descriptions is None else []
    if models is None:
        models = champions(tracking_uri, phase, device, dtype=dtype)
    else:
        check_models(models, phase, device, dtype)
    if speed_probe_ms is not None:
        check_probe_versions(models, speed_probe_version)
    if descriptions is not None:
        descs = descriptions
    else:
        descs = []
        for i, m in enumerate(model_refs):
            descs.append(described(m, input_size or m.input_size))
            if progress is not None:
                progress(i + 1, len(model_refs))
    # Past the largest batch a version learnt, trees answer as at it: a per-batch target is predicted
    # at that batch and scaled by the batch (PROPORTIONAL_TARGETS), its configuration's row made too.
    # A version with a trend under its trees goes on as its trend does (it grows with the work).
    top_batch = {t: top for t, m in models.items() if (top := scaled_top_batch(m, t)) is not None and max(sizes) > top}
    built = sizes + sorted(set(top_batch.values()) - set(sizes))
    t0 = time.perf_counter()
    network: dict[str, Any] = {}

    def network_level(rows: Any) -> None:  # while the layer rows are read (since 0.9.17: after them)
        network.update({t: m.network_level(rows) for t, m in models.items()})

    rows, layer_rows = configuration_rows(descs, built, phase, device, with_rows=network_level,
                                          with_layers=with_features or any(m.layer is not None for m in models.values()))
    predictions = predict_rows(models, rows, layer_rows, network)
    references = {t: m.speed_reference_ms for t, m in models.items() if m.speed_reference_ms is not None}
    probe_versions = {t: models[t].speed_probe_version for t in references}
    if speed_probe_ms is not None:
        for p in predictions:
            for t, reference in references.items():
                if t in p:
                    p[t] *= speed_probe_ms / reference
    elapsed_ms = 1000 * (time.perf_counter() - t0) / max(len(rows), 1)
    index = {(d, bs): i for i, (d, bs) in enumerate((d, bs) for d in range(len(descs)) for bs in built)}
    scaled: dict[int, dict[str, int]] = {}
    for (d, bs), i in index.items():
        for t, top in top_batch.items():
            if bs > top:
                predictions[i][t] = predictions[index[(d, top)]][t] * bs / top
                scaled.setdefault(i, {})[t] = top
    keep = [index[(d, bs)] for d in range(len(descs)) for bs in sizes]
    rows, predictions = rows.iloc[keep].reset_index(drop=True), [predictions[i] for i in keep]
    scaled = {n: scaled[i] for n, i in enumerate(keep) if i in scaled}
    versions = {t: f"{m.name}/{m.version}" for t, m in models.items()}
    memory = {t: m.device_memory_mb for t, m in models.items() if m.device_memory_mb is not None}
    largest = {t: m.largest_peak_mb for t, m in models.items() if m.largest_peak_mb is not None}
    methods = {t: m.method for t, m in models.items()}
    floors = {t: memory_floor_mb(rows, phase, m.floor_columns) for t, m in models.items() if m.floor_columns}
    floors = {t: f for t, f in floors.items() if f is not None}
    # what a memory target needs where its readings saturate (a hinge trend): the verdicts compare it
    demands = {t: m.predict(rows, saturated=False) for t, m in models.items()
               if m.trend is not None and m.trend.kind == "hinge"}

    def need(i: int, t: str) -> float:
        return float(demands[t][i]) if t in demands else predictions[i].get(t, 0.0)

    missing = [t for t in TARGETS if t not in models]
    features = feature_columns(list(rows.columns)) if with_features else []
    older = [t for t, m in models.items() if (m.node_rows_version or 0) < BATCH_ANYWHERE_VERSION]
    anew = {desc.description_hash: counted_anew(desc) for desc in descs} if older else {}  # none to tell
    # per network, per target whose version learnt from an earlier node rows version: what of it is counted otherwise
    since = {m.node_rows_version for m in models.values() if (m.node_rows_version or 0) < NODE_ROWS_VERSION}
    otherwise = {(desc.description_hash, v): counted_otherwise(desc, v) for desc in descs for v in since}
    capped = [cap_at_peak(p) for p in predictions]
    out = []
    configs = [(desc, bs) for desc in descs for bs in sizes]  # configuration_rows' order
    for i, (desc, bs) in enumerate(configs):
        row = rows.iloc[i]
        outside = {t: found for t, m in models.items() if (found := outside_ranges(m.ranges, row))}
        batched = older if anew.get(desc.description_hash) else []
        kinds = {t: found for t, m in models.items()
                 if (found := otherwise.get((desc.description_hash, m.node_rows_version)))}
        out.append({
            "model": desc.name, "model_hash": desc.description_hash, "batch_size": bs, "phase": phase,
            "device": device, "dtype": dtype, "predictions": predictions[i], "units": {t: TARGETS[t] for t in predictions[i]},
            "model_versions": dict(versions), "methods": dict(methods), "missing_targets": list(missing),
            # Per target, the features of this configuration beyond what its version learnt from.
            "outside_trained_range": outside,
            # Per memory target whose version knows it, the device's memory (MB), and the targets
            # predicted above it: such a configuration cannot fit on that device. Where the device
            # has run out of memory, a peak above the largest that ran is one it is not known to
            # reach (a board's usable memory is less than its total: perf4sight's TX2 never ran
            # past about 6,300 of 7,859 MB).
            "device_memory_mb": dict(memory),
            "exceeds_device_memory": [t for t, mb in memory.items() if need(i, t) > mb],
            # per memory target whose trend saturates, what it needs (MB), past what the device reads
            "memory_demand_mb": {t: need(i, t) for t in demands},
            "largest_peak_measured_mb": dict(largest),
            "above_largest_peak_measured": [t for t, mb in largest.items() if need(i, t) > mb],
            # Per memory target whose version keeps one, the floor of this configuration: what its
            # own tensors hold at once (runtime.memory_floor_mb), and the targets the version's model
            # put below it, so raised to it (past the batches it learnt, trees answer as at the last)
            "memory_floor_mb": {t: float(f[i]) for t, f in floors.items() if f[i] == f[i]},
            "at_memory_floor": [t for t, f in floors.items() if f[i] == f[i] and predictions[i][t] <= f[i]],
            "memory_floor_columns": {t: list(models[t].floor_columns) for t in floors},
            # network_mem_mb or tensor_peak_mb where its version predicted more than peak_mem_mb's did: lowered to it
            "capped_at_peak": capped[i],
            # The targets whose version learnt from features counted before 0.8.0, where this
            # network has tensors whose batch is not their first dimension, counted anew since
            # (describe.features.counted_anew): the version saw such networks' features otherwise.
            # learnt_from_other_counts: these and counted_otherwise's, every target that did
            "batched_otherwise": batched,
            # Per target whose version learnt from an earlier node rows version (its node_rows_version), the
            # kinds of this network's nodes counted otherwise since, each with the node rows version that counts
            # it as this tracker does (describe.features.counted_otherwise): mnasnet's mean, a segmentation
            # network's interpolate (9)
            "counted_otherwise": kinds,
            "node_rows_version": {t: m.node_rows_version for t, m in models.items()},
            "learnt_from_other_counts": [t for t in models if t in batched or t in kinds],
            # Per target predicted past the largest batch its version learnt: that batch (the target
            # predicted there, times this batch over it)
            "scaled_from_batch": scaled.get(i, {}),
            # Per target whose version learnt at a reference speed, the speed probe's time there (ms): the
            # prediction is the latency at that speed, or at ``at_speed_probe_ms``'s where one was given
            "speed_reference_ms": dict(references),
            # and the version of the speed probe that time is of (its tag speed_probe_version; None where it has
            # none, taken as this tracker's): --speed-probe-ms, a time of this tracker's, moves one of it alone
            "speed_probe_version": dict(probe_versions),
            **({"at_speed_probe_ms": speed_probe_ms,  # and each such target at its version's reference speed, beside
                "predictions_at_reference_speed": {t: predictions[i][t] * r / speed_probe_ms
                                                   for t, r in references.items() if t in predictions[i]}}
               if speed_probe_ms is not None and references else {}),
            "predict_ms": round(elapsed_ms, 2),
        })
        if with_features:
            calls = layer_rows[layer_rows["parent_run_id"] == row["run_id"]][LAYER_INPUTS].to_dict("records")
            out[-1]["features"] = {**_plain(row[features].to_dict()), LAYERS: [_plain(call) for call in calls]}
    return out


#: The longest speed probe a prediction is put at: the probe is about 2 ms of work here, so a minute is a
#: machine 30,000 times slower. Past it a figure such as 1e308 gave latencies of inf (``Infinity`` in
#: predict's JSON, which no JSON reader takes) until 0.9.10.
MAX_SPEED_PROBE_MS = 60_000.0


def check_speed_probe_ms(value: float | None, name: str = "speed_probe_ms") -> None:
    """A speed probe's time to predict at (``predict_grid``'s ``speed_probe_ms``, ``predict
    --speed-probe-ms``: ``name``) is a positive, finite number of ms up to ``MAX_SPEED_PROBE_MS``, or None."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_SPEED_PROBE_MS):
        raise FingerprintError(f"{name} must be a positive number of ms, at most {MAX_SPEED_PROBE_MS:,.0f}, "
                               f"got {value:g}")


def check_probe_versions(models: dict[str, Champion], version: int | None = None) -> None:
    """A speed probe's time of ``version`` (None: this tracker's, ``PROBE_VERSION``) can put the latency of
    each of ``models`` that learnt at a reference speed at the machine's speed then only where that reference
    is a time of the same probe version (its tag ``speed_probe_version``; a reference without one is taken as
    this tracker's, as ``tracker device speed`` takes it): else a FingerprintError saying both versions and
    what to do."""
    from tracker.profile.probe import PROBE_VERSION

    given = PROBE_VERSION if version is None else int(version)
    for m in models.values():
        theirs = PROBE_VERSION if m.speed_probe_version is None else m.speed_probe_version
        if m.speed_reference_ms is not None and theirs != given:
            mine = "this tracker's" if version is None else "its run's"
            raise FingerprintError(
                f"{m.name} version {m.version} learnt at the speed of speed probe version {theirs}, and the "
                f"speed probe time given is of {mine} version {given}: another unit, not rescaled; predict without "
                f"--speed-probe-ms (at the speed it learnt at), or train one from measurements of probe version "
                f"{given} (tracker fingerprint train)")


def fit_figure(result: dict[str, Any], target: str) -> float:
    """What a question of fit compares of a target in one of :func:`predict_grid`'s results (a memory
    budget, an order by memory, the largest batch under a limit): a memory target's demand where its
    readings saturate (``memory_demand_mb``, a hinge trend), else its prediction."""
    return result.get("memory_demand_mb", {}).get(target, result["predictions"][target])


def check_models(models: dict[str, Champion], phase: str, device: str, dtype: str = "float32") -> None:
    """Each of ``models`` (by target) a version of that target for ``phase``, ``device`` and
    ``dtype``, as its registered name says (``registered_name``): a version of the device mode a
    search predicts with (its runs on ``device``) too. Another's is a FingerprintError naming it
    (its values were labelled with the phase and device asked, until 0.9.8)."""
    from tracker.profile.device import canonical_device

    for target, champ in models.items():
        names = {registered_name(target, phase, device, dtype)}
        if champ.mode and device in {canonical_device(d) for d in champ.devices or ()}:
            names.add(registered_name(target, phase, champ.mode, dtype))
        if champ.name not in names:
            raise FingerprintError(f"{champ.name} version {champ.version} is not a {target} fingerprint of {phase} on "
                                   f"{device!r}" + (f" in {dtype}" if dtype != "float32" else "")
                                   + f" (that would be {registered_name(target, phase, device, dtype)}): load the "
                                   "models of the phase, device and number format predicted")


#: Parts of the process's peak (``peak_mem_mb``): the network's own memory, and its tensors' (since 0.9.34).
PARTS_OF_PEAK = ("network_mem_mb", "tensor_peak_mb")


def cap_at_peak(predictions: dict[str, float]) -> list[str]:
    """The network's own memory and its tensors are parts of the process's peak: a ``network_mem_mb``
    or ``tensor_peak_mb`` predicted above the ``peak_mem_mb`` predicted beside it is lowered to it (past
    what either version learnt each answers on its own: 129,366 MB of a 128,747 MB peak until 0.9.4).
    The targets lowered."""
    lowered = [t for t in PARTS_OF_PEAK if predictions.get(t, 0.0) > predictions.get("peak_mem_mb", math.inf)]
    for target in lowered:
        predictions[target] = predictions["peak_mem_mb"]
    return lowered


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON takes it: numbers as floats, text as it is, a NULL as None."""
    import pandas as pd

    return {k: None if pd.isna(v) else v if isinstance(v, str) else float(v) for k, v in values.items()}


#: The largest batch size ``tracker predict --largest-batch`` tries (``profile boundary``'s default
#: --max-batch is 1024; a prediction costs no device, so further).
MAX_PREDICTED_BATCH = 65536
#: The memory limits a peak-memory champion may record, by the name they go by in the answer.
MEMORY_LIMITS = {"largest_peak_measured": "largest_peak_mb", "device_memory": "device_memory_mb"}


def largest_under(peak_mb: Any, limit_mb: float, max_batch: int = MAX_PREDICTED_BATCH) -> int | None:
    """The largest batch size whose ``peak_mb`` (a function of a list of batch sizes, answering a
    predicted peak each) is at most ``limit_mb``: doubling from 1 (the doubling sizes asked for
    at once), then bisecting between the last size under the limit and the first over. 0 when
    batch 1 is over; None when no size up to ``max_batch`` is."""
    doubling = [1 << i for i in range(max_batch.bit_length())]
    over = next((s for s, p in zip(doubling, peak_mb(doubling)) if p > limit_mb), None)
    if over is None:
        return None
    low, high = over // 2, over
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if peak_mb([mid])[0] > limit_mb else (mid, high)
    return low


def boundary_command(ref: str, phase: str, device: str, champ: Champion, start: int,
                     input_size: int | None = None, store: Sequence[str] = ()) -> str:
    """The ``tracker profile boundary ... --search`` that measures what :func:`largest_batch` predicted
    for ``ref``, from ``start``, on the device and in the mode ``champ``'s runs were measured in:
    ``device`` where it is one ``profile`` takes (cpu, cuda, cuda:N), else the one device its runs
    name (or its mode id names), with the mode's threads and allocator. Where none is one (a device
    name such as jetson-tx2 with a version before 0.8.9 or perf4sight's imports), the command is for that device itself and says ``--device
    DEVICE``, to be put as its runs ran (cpu or cuda), rather than name a device it did not run on."""
    import re

    from tracker.profile.device import is_device_name

    kinds = champ.devices or ()
    mode = champ.mode or (None if is_device_name(device) else device)
    # a mode id names its device (cpu-t1, cuda0-sm1980-..., jetson-maxn-0-cuda0-...): for versions before 0.8.9
    named = re.search(r"(?:^|-)(cpu|cuda(\d+))(?:-|$)", mode or "")
    on = (device if is_device_name(device) else kinds[0] if len(kinds) == 1 and is_device_name(kinds[0])
          else None if named is None else "cpu" if named[1] == "cpu" else f"cuda:{named[2]}")
    args = [ref, "--phase", phase, "--device", on or "DEVICE"]
    if mode and (threads := re.search(r"(?:^|-)t(\d+)(?:-|$)", mode)):
        args += ["--threads", threads[1]]
    if mode and mode.endswith("-retain"):
        args += ["--allocator", "retain"]
    if input_size:
        args += ["--input-size", str(input_size)]
    # a ref a path with a space: quoted; ``store``: the words naming the store the fingerprint read where a
    # command finds another (settings.store_words; since 0.9.10)
    command = "tracker " + shell_line(*store, "profile", "boundary", *args, "--start", start, "--search")
    return command if on else f"on {device} (its DEVICE: cpu or cuda, as its runs ran): {command}"


def largest_batch(tracking_uri: str, refs: list[str], phase: str, device: str, input_size: int | None = None,
                  max_batch: int = MAX_PREDICTED_BATCH, dtype: str = "float32") -> list[dict[str, Any]]:
    """For each network, the largest batch size whose predicted peak memory stays under each limit
    the ``peak_mem_mb`` champion records: the largest peak it learnt from, where the device has
    run out of memory (above it, ``predict`` says "may not fit"), and the device's memory (above
    it, "would not fit"). As ``profile boundary
    --search`` finds it on the device, without running anything: the batch size doubles from 1
    until the prediction passes the limit, then bisects between the last size under it and the
    first over (so it takes the predicted peak to grow with the batch in between). A limit the
    prediction does not pass by ``max_batch``: None, and ``beyond_max_batch`` names it; one
    passed at batch 1: 0. A version that keeps a memory floor grows at least as the network's own
    tensors do; ``over_by_memory_floor`` says, per limit, where that floor alone put the first
    size over it (the model's prediction had stopped growing: past ``learnt_batch_sizes``)."""
    from tracker.describe import described
    from tracker.settings import store_words

    if max_batch < 1:
        raise FingerprintError(f"the largest batch size to try must be at least 1, got {max_batch}")
    store = store_words(tracking_uri)  # before MLflow, loading a champion, sets MLFLOW_TRACKING_URI to this store
    model_refs = _model_refs(refs, input_size)
    models = champions(tracking_uri, phase, device, targets=("peak_mem_mb",), dtype=dtype)
    champ = models["peak_mem_mb"]
    limits = {name: value for name, tag in MEMORY_LIMITS.items()
              if (value := getattr(champ, tag)) is not None}
    if not limits:
        raise FingerprintError(f"{champ.name} version {champ.version} records no memory limit: its runs did not "
                               "record the device's memory (measured by tracker 0.5.0 or earlier) and none ran out "
                               "of memory; measure again, or retrain with tracker fingerprint train")
    out = []
    for ref, model_ref in zip(refs, model_refs):
        desc = described(model_ref, input_size or model_ref.input_size)
        predicted: dict[int, dict[str, Any]] = {}

        def peak_mb(sizes: list[int]) -> list[float]:
            todo = [s for s in sizes if s not in predicted]
            if todo:  # the sizes asked for together share one pass of the feature SQL
                for result in predict_grid(tracking_uri, [ref], todo, phase, device, models=models, dtype=dtype,
                                           descriptions=[desc]):
                    predicted[result["batch_size"]] = result
            return [fit_figure(predicted[s], "peak_mem_mb") for s in sizes]

        found = {name: largest_under(peak_mb, limit, max_batch) for name, limit in limits.items()}
        # the first size over a limit (largest_under predicted it) is over by the floor alone: what
        # the network's own tensors hold at once, where the model's prediction stopped growing
        by_floor = {name: b is not None and "peak_mem_mb" in predicted[b + 1]["at_memory_floor"]
                    for name, b in found.items()}
        first = predicted[min(predicted)]  # what of the network the version learnt otherwise, at any batch (0.9.25)
        out.append({
            "model": desc.name, "model_hash": desc.description_hash, "phase": phase, "device": device, "dtype": dtype,
            "target": "peak_mem_mb", "model_version": f"{champ.name}/{champ.version}", "limits_mb": limits,
            "largest_batch": found,
            "predicted_peak_mb": {n: predicted[b]["predictions"]["peak_mem_mb"] if b else None for n, b in found.items()},
            # where the version's readings saturate (a hinge trend): what that batch needs, the figure
            # compared with the limit (predicted_peak_mb, the reading, is under it; since 0.9.8)
            **({"memory_demand_mb": {n: predicted[b]["memory_demand_mb"]["peak_mem_mb"] if b else None
                                     for n, b in found.items()}}
               if any("peak_mem_mb" in r["memory_demand_mb"] for r in predicted.values()) else {}),
            "outside_trained_range": {n: predicted[b]["outside_trained_range"].get("peak_mem_mb", {}) if b else {}
                                      for n, b in found.items()},
            "beyond_max_batch": [n for n, b in found.items() if b is None], "max_batch": max_batch,
            "over_by_memory_floor": by_floor, "learnt_batch_sizes": champ.ranges.get("batch_size"),
            "memory_floor_columns": list(champ.floor_columns or ()),
            # as predict says them (its fields of the same names, for peak_mem_mb)
            "node_rows_version": champ.node_rows_version,
            "counted_otherwise": first["counted_otherwise"].get("peak_mem_mb", {}),
            "batched_otherwise": "peak_mem_mb" in first["batched_otherwise"],
        })
        if starts := [b for b in found.values() if b]:  # where to start measuring it: the smaller answer
            out[-1]["measure_command"] = boundary_command(ref, phase, device, champ, min(starts), input_size, store)
    return out
