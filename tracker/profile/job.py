"""Training jobs: a model, a dataset on disk and a TOML config, profiled step by step.

    model = "resnet18"                # a zoo name (classification or detection), or a classifier of
                                      # your own: a spec file or FILE.py:NAME, beside the job file
    [training]  num_epochs, batch_size, prefetch_factor, num_workers, device, max_steps, learning_rate,
                memory_limit_mb (CPU: cap the loop's memory growth, a smaller device; 0 = none),
                step_timeout_s (the longest the set-up or one step may take; 0 = no limit),
                threads (torch's intra-op threads; 0 = torch's default) and allocator ("system" or
                "retain", see modes.ALLOCATORS): the CPU mode the job runs in, as for networks
    [data]      path (relative to the config file), format (imagefolder|coco|voc), image_size,
                on_error ("skip": report the file and go on; "fail": the run fails with it)

Every step is a whole batch of ``batch_size`` images: a dataset smaller than one batch is refused
before anything runs, and a batch a skipped bad file left short is not timed but counted (the tag
``tracker.skipped_steps``), since 0.9.11.

Each step's time is split into data wait (the loader's ``next``), host-to-device copy,
forward (with the loss), backward and optimizer, the device synchronised around each part.
One MLflow run of kind ``training`` per job: the config as params, per-step figures as
metric histories (written in batches), epoch summaries, and the summary metrics. The steps
run in a measuring child process, as networks do (``run_job``). An out-of-memory step ends
the run FAILED with reason ``oom``, a crashed or killed child with its reason, a child with
no step for ``step_timeout_s`` (hung: a deadlocked loader worker, say) with reason
``timeout``; Ctrl-C ends it KILLED; each keeps the steps measured so far.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from tracker.console import counted, shell_word
from tracker.errors import ConfigError, MeasurementError, UnknownModelError
from tracker.settings import MAX_BATCH, MAX_EPOCHS, MAX_TIMEOUT_S, MAX_TRAINING_STEPS
from tracker.zoo.generator import MAX_SPEC_SIZE

TOP = {"model": str}
TRAINING = {"num_epochs": int, "batch_size": int, "prefetch_factor": int, "num_workers": int, "device": str,
            "max_steps": int, "learning_rate": float, "memory_limit_mb": float, "step_timeout_s": float,
            "threads": int, "allocator": str}
DATA = {"path": str, "format": str, "image_size": int, "on_error": str}
#: The [training] settings that make the CPU mode; left out of a job's digest at their defaults.
MODE_FIELDS = ("threads", "allocator")
STEP_PARTS = ("data_wait_ms", "h2d_ms", "forward_ms", "backward_ms", "optimizer_ms")
#: Steps at a job's start left out of its statistics and samples (kept as their warm-up): the set-up.
WARMUP_STEPS = 1
#: The artifact naming the bad files a job skipped, each with why (its tag tracker.skipped_files counts them)
SKIPPED_FILES_ARTIFACT = "skipped_files.json"
#: The tag counting a job's steps skipped, not timed, because a bad file left their batch short (since 0.9.11)
SKIPPED_STEPS_TAG = "tracker.skipped_steps"
#: The most batches a loader worker loads ahead (``[training].prefetch_factor``, ``[sweep]``'s, --prefetch-factor):
#: past a few they only hold memory, and the loader's set-up counts to prefetch_factor x num_workers, so that
#: 10**400, taken until 0.9.13, hung the job before its first step (in a job file, a [sweep] or the option).
MAX_PREFETCH_FACTOR = 1024
#: The most of a setting a job file takes: a batch as --batch-size does (any was taken until 0.9.7), and an
#: image size as a network's spec its input_size (MAX_SPEC_SIZE: the job's image_size is its network's input;
#: since 0.9.8, before which 99999999999 was taken, each image failed to resize and was skipped, and the job
#: was a FINISHED run of no step). Not data synth's MAX_SIZE_PX, a bound on the files it draws: a job resizes
#: files of any size, a real dataset's larger ones too. A prefetch factor at most MAX_PREFETCH_FACTOR; epochs and
#: steps at most MAX_EPOCHS and MAX_TRAINING_STEPS, a step's time limit at most MAX_TIMEOUT_S (any number was taken
#: until 0.9.14, and a typo's run went on until it was stopped, or a hung job's 1e308 s wait for its step).
MOST = {"batch_size": MAX_BATCH, "image_size": MAX_SPEC_SIZE, "prefetch_factor": MAX_PREFETCH_FACTOR,
        "num_epochs": MAX_EPOCHS, "max_steps": MAX_TRAINING_STEPS, "step_timeout_s": MAX_TIMEOUT_S}


@dataclass
class JobConfig:
    model: str
    data_path: Path
    data_format: str = "imagefolder"
    image_size: int = 128
    on_error: str = "skip"
    num_epochs: int = 1
    batch_size: int = 4
    prefetch_factor: int = 2
    num_workers: int = 0
    device: str = "cpu"
    max_steps: int = 0  # 0: no limit
    learning_rate: float = 0.01
    memory_limit_mb: float = 0.0  # 0: none; else the loop's memory growth is capped (a smaller device)
    step_timeout_s: float = 600.0  # 0: none; else a job with no step for this long (set-up included) is hung
    threads: int = 0  # torch's intra-op threads in the child; 0: torch's default (part of the mode)
    allocator: str = "system"  # how the child's C allocator keeps freed memory (modes.ALLOCATORS; part of the mode)
    source: str = ""
    #: a network that is not a zoo name (a spec file's, or FILE.py:NAME's with its code), as the job
    #: file named it when it was read: what the child builds, and part of the job's digest
    network_spec: dict[str, Any] | None = None

    @property
    def model_name(self) -> str:
        """The network as its runs name it: a zoo name, or its spec's name (``mynet.Net``)."""
        return str(self.network_spec["name"]) if self.network_spec else self.model

    def params(self) -> dict[str, Any]:
        return {"model": self.model_name, "batch_size": self.batch_size, "input_size": self.image_size,
                "phase": "training", "device": self.device, "precision": "float32", "optimizer": "sgd",
                "num_epochs": self.num_epochs, "num_workers": self.num_workers,
                "prefetch_factor": self.prefetch_factor, "max_steps": self.max_steps, "learning_rate": self.learning_rate,
                "dataset": f"{self.data_format}:{self.data_path.name}",
                # the folder itself (since 0.9.8): two datasets of one folder name were one in the warehouse
                "data_path": str(self.data_path),
                **({"memory_limit_mb": float(self.memory_limit_mb)} if self.memory_limit_mb else {})}

    def digest(self) -> str:
        # what was measured: not where the file was, nor how long a hung job was waited for; the mode
        # settings only where set, so that jobs measured before they existed keep their keys
        defaults = {f.name: f.default for f in fields(self) if f.name in MODE_FIELDS}
        body = {k: str(v) for k, v in asdict(self).items()
                if k not in ("source", "step_timeout_s", "network_spec") and not (k in defaults and v == defaults[k])}
        if self.network_spec is not None:  # the network as read, not the name of its file (zoo jobs keep their keys),
            from tracker.describe import spec_json, unplaced  # nor its folder (an unedited copy was another job until 0.9.6)

            body["network_spec"] = hashlib.sha256(spec_json(unplaced(self.network_spec)).encode()).hexdigest()
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def load_job(path: Path, **overrides: Any) -> JobConfig:
    """Read and check a job file; ``overrides`` replace [training] values (loader campaigns)."""
    from tracker.data import FORMATS
    from tracker.profile.campaign import check_bound, check_limit_mb, read_toml, typed_table
    from tracker.profile.device import canonical_device, is_device_name
    from tracker.profile.modes import validate_allocator, validate_threads
    from tracker.zoo import check_model_name

    where = str(path)
    raw = read_toml(path, "job config")
    training, data = raw.pop("training", {}), raw.pop("data", {})
    sweep = raw.pop("sweep", None)
    typed_table("", raw, TOP, where, tables=("[training]", "[data]", "[sweep]"))  # the tables said since 0.9.5
    typed_table("training", training, TRAINING, where)
    typed_table("data", data, DATA, where)
    if sweep is not None and not isinstance(sweep, dict):
        raise ConfigError(f"{where}: [sweep] should be a table")
    if "model" not in raw:
        raise ConfigError(f"{where}: missing key model (a zoo name, e.g. resnet18 or fasterrcnn_resnet50_fpn, "
                          "a spec file or FILE.py:NAME)")
    if "path" not in data:
        raise ConfigError(f"{where}: missing key [data].path")
    for label, value in (("model", raw["model"]), ("[data].path", data["path"])):
        if "\x00" in value:  # a ValueError's traceback (embedded null byte) until 0.9.8
            raise ConfigError(f"{where}: {label} {value!r} holds a NUL character, which no file name can")
    cfg = JobConfig(model=raw["model"], data_path=(path.parent / data["path"]).resolve(), source=str(path))
    for key in ("format", "image_size", "on_error"):
        if key in data:
            setattr(cfg, "data_format" if key == "format" else key, data[key])
    for key, value in {**training, **{k: v for k, v in overrides.items() if v is not None}}.items():
        setattr(cfg, key, value)
    for key, least in (("num_epochs", 1), ("batch_size", 1), ("image_size", 1), ("num_workers", 0), ("max_steps", 0),
                       ("memory_limit_mb", 0), ("prefetch_factor", 1), ("step_timeout_s", 0), ("threads", 0)):
        # named with its section, as every other key (``image_size must be at least 1`` until 0.9.3)
        check_bound(where, f"[{'data' if key == 'image_size' else 'training'}].{key}", getattr(cfg, key), least=least,
                    most=MOST.get(key))
    check_bound(where, "[training].learning_rate", cfg.learning_rate, above=0)
    check_limit_mb(where, "[training].memory_limit_mb", cfg.memory_limit_mb)
    check_num_workers(cfg.num_workers, f"{where}: [training].num_workers")
    if cfg.threads:  # more than this machine's CPUs: said here, not by the measuring child
        validate_threads(cfg.threads, f"{where}: [training].threads =")
    try:
        validate_allocator(cfg.allocator)
    except ConfigError as exc:
        raise ConfigError(f"{where}: [training].{exc}") from None
    if cfg.on_error not in ("skip", "fail"):
        raise ConfigError(f"{where}: [data].on_error must be skip or fail, got {cfg.on_error!r}")
    if not is_device_name(cfg.device):
        raise ConfigError(f"{where}: [training].device must be cpu or cuda[:N], got {cfg.device!r}")
    cfg.device = canonical_device(cfg.device)
    if cfg.data_format not in FORMATS:
        raise ConfigError(f"{where}: [data].format must be one of {', '.join(FORMATS)}, got {cfg.data_format!r}")
    if not cfg.data_path.is_dir():
        raise ConfigError(f"{where}: [data].path: {cfg.data_path} is not a folder")
    cfg.network_spec = job_network(cfg.model, path.parent, where)
    if cfg.network_spec is not None:
        return cfg
    try:  # last: the zoo's names cost an import of torchvision (seconds)
        check_model_name(cfg.model)
    except UnknownModelError as exc:  # the job file named, as a bad key's line names it (not until 0.9.8)
        raise UnknownModelError(f"{where}: model: {exc}") from None
    from tracker.zoo import segmentation_models

    if cfg.model in segmentation_models():
        raise ConfigError(f"{where}: model {cfg.model!r} is a segmentation network, and a training job trains on "
                          "classification folders or detection boxes, not masks: `tracker profile network "
                          f"{shell_word(cfg.model)} --phase training` measures its step on random per-pixel classes")
    return cfg


def job_network(model: str, folder: Path, where: str) -> dict[str, Any] | None:
    """The spec of a job's ``model`` where it is not a zoo name: a spec file (``.json``, or a path)
    or ``FILE.py:NAME``, each relative to the job file's ``folder``; None for a zoo name. A training
    job feeds it the dataset's RGB images and trains it on the dataset's classes: a network of
    other inputs is refused in one line."""
    from tracker.zoo.spec import MODULE_REF, names_file_in, resolve

    if not names_file_in(model, folder):  # a zoo name, a file of its name beside the job file or not (0.9.8)
        return None
    match = MODULE_REF.match(model)
    ref_text = f"{folder / match['file']}:{match['attr']}{match['args'] or ''}" if match else str(folder / model)
    try:
        ref = resolve(ref_text)
    except ConfigError as exc:
        raise ConfigError(f"{where}: model: {exc}") from None
    if ref.input_shape is not None or ref.in_channels != 3:
        takes = (f"inputs of shape {'x'.join(map(str, ref.input_shape))}" if ref.input_shape is not None
                 else f"{ref.in_channels}-channel images")
        raise ConfigError(f"{where}: model {ref.name} takes {takes}, and a training job feeds it the dataset's "
                          "RGB images")
    return ref.spec


#: The least value of each setting a loader campaign sweeps.
SWEEP_LEAST = {"num_workers": 0, "prefetch_factor": 1, "batch_size": 1}
#: The most loader workers a job starts, per CPU of this machine: a worker is a process decoding
#: images, so past a few a CPU they only wait for a core (torch itself warns past one a CPU), and
#: 100,000 of them hung the job at its set-up until 0.9.6.
WORKERS_PER_CPU = 4


def max_num_workers() -> int:
    """The most ``num_workers`` a job takes on this machine: :data:`WORKERS_PER_CPU` x its CPUs."""
    return WORKERS_PER_CPU * (os.cpu_count() or 1)


def check_num_workers(value: int, label: str) -> None:
    """A ConfigError naming ``label`` (``FILE: [training].num_workers``, ``FILE: [sweep].num_workers``,
    ``--num-workers``) where ``value`` is more workers than :func:`max_num_workers`."""
    if value > (most := max_num_workers()):
        raise ConfigError(f"{label} must be at most {most} ({WORKERS_PER_CPU} x the {os.cpu_count() or 1} CPUs of "
                          f"this machine), got {value}")


def check_sweep(key: str, values: list[int], where: str) -> None:
    """A ConfigError naming ``where`` the values came from (``FILE: [sweep].num_workers`` or
    ``--num-workers``) where one is below the setting's least (said as ``[training]``'s, the job's
    own setting, until 0.9.5), where there is none, or, of num_workers, more than this machine
    takes (``check_num_workers``, as a job file's own: any number was taken, and a huge one hung
    its job, until 0.9.6)."""
    from tracker.profile.campaign import check_bound

    if not values:  # taken for no list at all, the job's own value measured, until 0.9.6
        raise ConfigError(f"{where} is empty: name at least one value, or leave it out")
    for value in values:  # a batch size at most as --batch-size (taken until 0.9.7), said as [training]'s (0.9.8)
        check_bound("", where, value, least=SWEEP_LEAST[key], most=MOST.get(key))
    if key == "num_workers":
        for value in values:
            check_num_workers(value, where)


def sweep_of(path: Path) -> dict[str, list[int]]:
    """The [sweep] table of a job file: lists of num_workers, prefetch_factor, batch_size."""
    from tracker.profile.campaign import read_toml

    raw = read_toml(path, "job config").get("sweep", {})
    out = {}
    for key in ("num_workers", "prefetch_factor", "batch_size"):
        values = raw.get(key)
        # true or false is no number of workers (TOML's booleans are Python's, ints too: `num_workers = [true, 0]`
        # was said "workers True: to measure", and measured until the child refused it, until 0.9.8)
        if values is not None and (not isinstance(values, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in values)):
            raise ConfigError(f"{path}: [sweep].{key} should be a list of whole numbers, got {values!r:.80}")
        if values is not None:
            check_sweep(key, values, f"{path}: [sweep].{key}")
            out[key] = values
    if unknown := set(raw) - {"num_workers", "prefetch_factor", "batch_size"}:
        raise ConfigError(f"{path}: unknown key [sweep].{sorted(unknown)[0]} (known: num_workers, prefetch_factor, batch_size)")
    return out


def steps_per_epoch(images: int, batch_size: int) -> int:
    """Steps of an epoch over ``images``: whole batches alone (the loader drops the last, partial one:
    a step of fewer images is another configuration than the job's batch size, and a batch of one image
    fails a network's batch norm in training, the whole job with it, until 0.9.10). A dataset smaller
    than one batch is refused (:func:`check_batch_fits`; until 0.9.11 it was one step of all of it,
    measured as the job's batch size)."""
    return images // batch_size


def check_batch_fits(cfg: JobConfig, images: int) -> None:
    """A :class:`DatasetSmallerThanBatchError` naming the dataset, its image count and the job's batch
    size where the dataset holds fewer ``images`` than one batch: no step would be a whole batch."""
    from tracker.errors import DatasetSmallerThanBatchError

    batch = cfg.batch_size
    if images < batch:
        raise DatasetSmallerThanBatchError(
            f"dataset {cfg.data_path} holds {counted(images, 'image')}, fewer than one batch of {batch}: each step "
            f"would train on {'it' if images == 1 else f'all {images}'}, measured as batch {batch}; give a batch size "
            f"of at most {images}, or more images", f"{cfg.source}: " if cfg.source else "")


def job_run_name(cfg: JobConfig) -> str:
    """``resnet18 · job · bs8 · 112px · w0 p2 · cpu``: the image size after the batch where it is not
    224 pixels, and the mode's settings the job asked for after the device (``cpu · t1 · retain``), as a
    network run's name says them (:func:`tracker.profile.records.run_name`). Until 0.9.10 neither was
    said: jobs at two image sizes or in two modes had one name in ``runs list`` and the MLflow UI."""
    from tracker.profile.records import USUAL_INPUT_SIZE

    size = f" · {cfg.image_size}px" if cfg.image_size != USUAL_INPUT_SIZE else ""
    settings = (f" · t{cfg.threads}" if cfg.threads else "") + (f" · {cfg.allocator}" if cfg.allocator != "system" else "")
    return (f"{cfg.model_name} · job · bs{cfg.batch_size}{size} · w{cfg.num_workers} p{cfg.prefetch_factor} · "
            f"{cfg.device}{settings}")


def job_key_fields(cfg: JobConfig) -> dict[str, Any]:
    """A job's configuration key fields: the same settings make the same key (campaigns resume on
    it), and, as for networks, results from other software versions or measurement protocols are
    not reused. Keys made before tracker 0.4.0 lack ``job_measurement``; a job with a memory cap
    has the kind of cap too (``memcap.planned_kind``: the same limit means another thing in each),
    which keys before tracker 0.7.0 lack, and since 0.9.6 ``cap_counts`` (``memcap.CAP_COUNTS``)."""
    from tracker import environment
    from tracker.profile import memcap

    return {"job": cfg.digest(), "software": environment.software_versions(),
            "job_measurement": str(environment.JOB_MEASUREMENT_PROTOCOL),
            **({"memory_cap": memcap.planned_kind(cfg.device), **memcap.cap_counts(True)} if cfg.memory_limit_mb
               else {})}


def job_config_key(cfg: JobConfig) -> str:
    """The configuration key of a job's ``training`` run (what ``run_job``'s record is tagged with):
    how a job measured before is found."""
    from tracker.log.record import config_key

    return config_key({"kind": "training", **job_key_fields(cfg)})


def run_loader_campaign(open_logger: Callable[[], Any], path: Path, sweep: dict[str, list[int]],
                        run: Callable[[JobConfig, Any], dict[str, Any]], dry_run: bool = False) -> list[dict[str, Any]]:
    """Every num_workers x prefetch_factor x batch_size setting of a job not yet measured, each ``run``
    with the job's dataset (:func:`check_job`'s); ``dry_run``: none measured, each not measured before
    said ``to measure``. ``open_logger`` opens the store (for a dry run: None where there is none or its
    experiment holds nothing yet), called once what refuses the job is checked (the job file, its dataset,
    its network) and only where a setting is left to measure or plan: a campaign refused, or each of whose
    settings is refused, makes no store (since 0.9.12; until then it was made first). Without workers a
    loader prefetches nothing, so ``num_workers`` 0 is measured at the first prefetch factor alone (since
    0.9.1: each factor was measured again, the same work)."""
    import itertools

    from tracker.errors import DatasetSmallerThanBatchError

    base = load_job(path)
    # what would refuse every setting, before the store is opened: the dataset scanned once, each setting's batch
    # checked against it (a dry run said "to measure" of a job that could not run until 0.9.6)
    dataset = job_dataset(base, check_batch=False)
    check_network_builds(base)
    check_network_input(base)  # the image size is every setting's
    # a value named twice is one setting (measured once but listed, and in a dry run counted, twice until 0.9.3)
    grid = {k: list(dict.fromkeys(sweep.get(k, [getattr(base, k)]))) for k in ("num_workers", "prefetch_factor", "batch_size")}
    settings: list[tuple[dict[str, int], JobConfig, DatasetSmallerThanBatchError | None]] = []
    for nw, pf, bs in itertools.product(*grid.values()):
        if nw == 0 and pf != grid["prefetch_factor"][0]:
            continue
        cfg = load_job(path, num_workers=nw, prefetch_factor=pf, batch_size=bs)
        try:
            check_batch_fits(cfg, len(dataset))
        except DatasetSmallerThanBatchError as exc:  # that setting alone, refused before anything of it ran (since
            # 0.9.11: measured as one step of the whole dataset under its batch size until then)
            settings.append(({"num_workers": nw, "prefetch_factor": pf, "batch_size": bs}, cfg, exc))
        else:
            settings.append(({"num_workers": nw, "prefetch_factor": pf, "batch_size": bs}, cfg, None))
    logger = open_logger() if any(refused is None for _, _, refused in settings) else None
    done = logger.measured(statuses=("FINISHED",)) if logger is not None else set()
    results: list[dict[str, Any]] = []
    for setting, cfg, refused in settings:
        if refused is not None:
            results.append({**setting, "status": "refused", "failure_message": refused.detail})
            continue
        if (measured := job_config_key(cfg) in done) or dry_run:
            results.append({**setting, "status": "skipped (measured)" if measured else "to measure"})
            continue
        r = run(cfg, dataset)
        # what ended a failed one too, as profile training says it (its line said the reason alone until 0.9.6)
        results.append({**setting, **{k: r.get(k) for k in (
            "run_id", "status", "reason", "failure_message", "steps", "skipped_steps", "median_step_ms",
            "data_wait_fraction", "images_per_s")}})
        if r["status"] == "KILLED":
            break
    return results


@dataclass
class JobResult:
    run_id: str
    status: str
    steps: int
    median_step_ms: float | None
    data_wait_fraction: float | None
    images_per_s: float | None
    peak_mem_mb: float | None
    skipped_files: list[dict[str, str]] = field(default_factory=list)
    reason: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    #: the device mode the job ran in (threads, allocator: modes.read_mode)
    mode: str | None = None
    #: minor page faults per step after the first (getrusage), where counted
    page_faults_per_iter_count: float | None = None
    #: the job was measured before (the same key): this is that run, read back, not a new one
    reused: bool = False
    #: on a GPU, the share of forward, backward and optimizer the host spent launching them (since 0.8.4)
    host_share_pct: float | None = None
    #: what ended a failed job, in a line (its run's tag tracker.failure_message; since 0.8.6)
    failure_message: str | None = None
    #: the median iteration, its step less the wait for data: the run's latency_ms (since 0.9.0)
    latency_ms: float | None = None
    #: the first steps (set-up: workers start, kernels warm), left out of every figure (since 0.9.0)
    set_up_steps: int = 0
    #: its iterations' 95 % CI over their median, and the CPU other processes took meanwhile (since 0.9.1:
    #: a noisy job is said to be one, as a network's measurement is)
    latency_ci_rel: float | None = None
    cpu_util_others_pct: float | None = None
    #: the loader workers' own memory (USS) at its peak, beside peak_mem_mb, the main process's (since 0.9.2)
    workers_mem_peak_mb: float | None = None
    #: batches a bad file left short of the batch size, skipped rather than timed (since 0.9.11)
    skipped_steps: int = 0
    #: the machine's speed beside the steps: the speed probe's median (tracker.profile.probe, since 0.9.11)
    speed_probe_ms: float | None = None
    #: a reused run whose skipped_files.json cannot be read: why (its skipped files then unnamed; since 0.9.15)
    skipped_files_unreadable: str | None = None
    #: the machine's CPU use over its steps, which says whether any core was left idle beside the others'
    #: (``records.beside_other_work``; since 0.9.21)
    cpu_util_pct: float | None = None
    #: on a CPU, its tensors at most over one more step on its last batch (tracker.profile.tensors; since 0.9.31)
    tensor_peak_mb: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of_run(cls, run_id: str, status: str, steps: int, metrics: dict[str, float], skipped: list[dict[str, str]],
               reason: str | None, cfg: JobConfig, mode: str | None, reused: bool = False,
               skipped_steps: int = 0, skipped_files_unreadable: str | None = None) -> "JobResult":
        """The result of a job's run from its summary metrics (``_finish``'s, or a run read back)."""
        return cls(run_id, status, steps, metrics.get("step_time_ms"), metrics.get("data_wait_frac"),
                   metrics.get("throughput_per_s"), metrics.get("peak_mem_mb"), skipped, reason, cfg.params(), mode,
                   metrics.get("page_faults_per_iter_count"), reused, metrics.get("host_share_pct"),
                   latency_ms=metrics.get("latency_ms"), set_up_steps=int(metrics.get("warmup_count", 0)),
                   latency_ci_rel=metrics.get("latency_ci_rel"), cpu_util_others_pct=metrics.get("cpu_util_others_pct"),
                   workers_mem_peak_mb=metrics.get("workers_mem_peak_mb"), skipped_steps=skipped_steps,
                   speed_probe_ms=metrics.get("speed_probe_ms"), skipped_files_unreadable=skipped_files_unreadable,
                   cpu_util_pct=metrics.get("cpu_util_pct"), tensor_peak_mb=metrics.get("tensor_peak_mb"))


def check_network_builds(cfg: JobConfig) -> None:
    """A network of one's own (``FILE.py:NAME``) that does not build is bad input, one line, as for
    `profile network` (a FAILED run, "no step measured", until 0.9.3), naming the job file as a bad key
    does (since 0.9.8): a ConfigError."""
    if cfg.network_spec is not None and cfg.network_spec.get("kind") == "module":
        from tracker.zoo.spec import spec_ref

        try:
            spec_ref(cfg.network_spec).build()
        except ConfigError as exc:
            raise ConfigError(f"{cfg.source}: model: {exc}" if cfg.source else str(exc)) from None


def check_network_input(cfg: JobConfig) -> None:
    """A job's ``[data].image_size`` its network cannot take is bad input, one line naming the job file, a
    ConfigError, as ``profile network --input-size`` says it: a generated network (or one pruned from it)
    under the least size its stem and stages take (``check_input_size``), and a zoo network, or one generated
    or pruned from one, that cannot run on such an image (squeezenet1_1 at 4 px: ``describe_early``, its
    description cached). Until 0.9.12 the first was trained at that size (FINISHED) and the second failed as a
    measurement, "no step measured", status 3, a store made. A network of one's own code is not run here (its
    forward is the job's own, in the measuring child: what it does there, a Ctrl-C, is the job's), and a
    detection network resizes its images to its own transform's size."""
    from tracker.profile.api import describe_early
    from tracker.zoo import detection_models
    from tracker.zoo.spec import base_of_kind, check_input_size, spec_ref

    if cfg.network_spec is None and cfg.model in detection_models():
        return
    try:
        if cfg.network_spec is None:
            describe_early(cfg.model, cfg.image_size)
        elif base_of_kind(cfg.network_spec, "module") is not None:
            check_input_size(spec_ref(cfg.network_spec), cfg.image_size)
        else:
            describe_early(spec_ref(cfg.network_spec), cfg.image_size)
    except ConfigError as exc:
        raise ConfigError(f"{cfg.source}: [data].image_size: {exc}" if cfg.source else str(exc)) from None


def check_job(cfg: JobConfig) -> Any:
    """What refuses a job before anything of it runs or is logged (``job_dataset``'s checks, a dataset
    smaller than its batch among them, a network of one's own that does not build, and an image size its
    network cannot take), each a ConfigError; its dataset, scanned, where none does. ``profile training``
    checks a job so before it opens the store (since 0.9.12: a refused job made a store in a fresh folder
    until then)."""
    dataset = job_dataset(cfg)
    check_network_builds(cfg)
    check_network_input(cfg)
    return dataset


def run_job(logger: Any, cfg: JobConfig, progress: Callable[[int, int | None, float], None] | None = None,
            again: bool = False, dataset: Any = None) -> JobResult:
    """Train ``cfg.model`` on the dataset in a measuring child (``train``) and log one ``training``
    run; never raises for a measurement fault. A job measured before (a FINISHED run of the same
    key: the same job file settings, software and protocol) is read back, not measured again
    (``reused``), as ``profile network`` does; ``again`` measures it anyway, a repeat beside it
    (its own repeat key).

    The child streams each step as it is measured, so a step measured before the child crashed or
    was killed is kept (the run then fails with the child's reason); Ctrl-C is passed on to the
    child, which ends its loop and reports, and the run is KILLED with the steps measured so far.
    In a child, the CPU peak memory is the job's own, not that of this process (MLflow, the store,
    the jobs of a loader campaign before it), and a crash ends this job, not the campaign. ``dataset``:
    the job's, where the caller checked it (:func:`check_job`, or a loader campaign each setting's batch
    against it) before it opened the store; else it is checked here."""
    import tempfile

    from tracker.data.datasets import save_index
    from tracker.environment import gpu_tags, threads_tags
    from tracker.log.record import CHILD_NOTE_TAG, FAILURE_MESSAGE_TAG, REPEAT_KEY_TAG, RunRecord
    from tracker.profile.api import ensure_mode_logged
    from tracker.profile.child import stream_child
    from tracker.profile.memcap import CAP_TAG
    from tracker.zoo import detection_models

    if dataset is None:  # ConfigError before any run (a dataset smaller than a batch too)
        dataset = check_job(cfg)
    detection = cfg.network_spec is None and cfg.model in detection_models()
    key = job_config_key(cfg)
    if not again and (measured := logger.find(key, "FINISHED")) is not None:
        return _reused(measured, cfg, logger.location.uri)
    num_classes = len(dataset.classes) + (1 if detection else 0)
    if cfg.network_spec is None:
        model_hash = hashlib.sha256(f"{cfg.model}:{num_classes}:{cfg.image_size}".encode()).hexdigest()[:16]
    else:  # the network as read (its code, for one of your own, wherever its file is), at the job's size
        from tracker.describe import spec_json, unplaced

        model_hash = hashlib.sha256(f"{spec_json(unplaced(cfg.network_spec))}:{cfg.image_size}".encode()).hexdigest()[:16]
    # the device mode the job runs in, as for networks (threads: torch's default unless the job sets them)
    mode_id = ensure_mode_logged(logger, cfg.device, cfg.threads or None, cfg.allocator)
    record = RunRecord(kind="training", name=job_run_name(cfg),
                       params={**cfg.params(), "model_hash": model_hash, "mode": mode_id},
                       tags={"tracker.job": "training", "tracker.job_config": cfg.source,
                             "tracker.job_digest": cfg.digest(), "tracker.source": "measured"},
                       description=f"Training job of {cfg.model_name} on {cfg.data_path} ({cfg.data_format}), "
                                   "each step split into data wait, copy, forward, backward and optimizer.",
                       key_fields=job_key_fields(cfg))
    record.tags.update(gpu_tags(cfg.device))  # cuda:N: GPU N's name and memory, not GPU 0's
    record.tags.update(threads_tags(cfg.threads))  # the measuring child's, not this process's
    if again:
        import uuid

        record.tags[REPEAT_KEY_TAG] = f"{key}#{uuid.uuid4().hex[:12]}"
        record.name += " · again"  # told apart from the first in the UI, as a network's repeat (since 0.9.3)
    total = cfg.max_steps or cfg.num_epochs * steps_per_epoch(len(dataset), cfg.batch_size)
    steps: list[dict[str, float]] = []
    skipped: list[dict[str, str]] = []
    short: list[dict[str, float]] = []  # batches a bad file left short, not timed (train's "short_batch")

    def on_event(event: dict[str, Any]) -> None:
        if "step" in event:
            steps.append(event["step"])
            if progress:
                progress(len(steps), total, event["step"]["images"] / (1e-3 * event["step"]["step_time_ms"]))
        elif "skipped" in event:
            skipped.append(event["skipped"])
        elif "short_batch" in event:
            short.append(event["short_batch"])

    config = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    with tempfile.TemporaryDirectory(prefix="tracker-job-") as scratch:
        # the dataset as scanned here, handed to the child rather than scanned and parsed again there
        index = save_index(dataset, Path(scratch))
        child = stream_child({"kind": "training", "batch_size": cfg.batch_size, "config": config,
                              "dataset_index": str(index)}, on_event, event_timeout_s=cfg.step_timeout_s or None)
    record.start_time_ms += round(1000 * child.device_wait_s)  # from when the device was this process's
    end = child.payload if child.ok else {}
    # How the memory cap held the job (tracker.profile.memcap): as the child says, else as planned
    # (a child the cap's out-of-memory killer ended says nothing).
    if cap := child.payload.get("memory_cap", record.key_fields.get("memory_cap")):
        record.tags[CAP_TAG] = cap
    if child.ok and child.message:  # it measured, but had to be killed to end, or its exit status is not known
        record.tags[CHILD_NOTE_TAG] = child.message
    message = ""  # what ended a failed job, in a line (tracker.failure_message, as for networks since 0.8.5)
    if child.interrupted:
        record.status, record.tags["tracker.failure_reason"] = "KILLED", "interrupted"
    elif child.reason == "timeout":
        if steps:
            message = (f"step {len(steps) + 1} took over {cfg.step_timeout_s:g} s ([training].step_timeout_s): the job "
                       "was killed as hung")
        else:  # slow, perhaps, rather than hung: the child's start, the network's build, the workers' start
            message = (f"the set-up before the first step (the child's start, the network's build, the loader "
                       f"workers' start) took over {cfg.step_timeout_s:g} s ([training].step_timeout_s): killed as "
                       "hung; a larger limit lets a slow set-up finish")
        record.fail("timeout", "\n".join(x for x in (message, child.stderr_tail) if x))
    elif not child.ok:  # the child died, or failed outside its loop (building the model, say)
        message = child.message or ""
        record.fail(child.reason or "crash", "\n".join(x for x in (child.message, child.stderr_tail) if x))
    elif end.get("failure"):
        message = end["failure"][1]
        record.fail(*end["failure"])
    elif not steps:  # its loop ran out with no step: each batch's every item skipped (a corrupt JPEG each, a COCO
        # file whose every annotation is broken) or none at all. A FINISHED run of no step until 0.9.8, tagged
        # stop_reason epochs and read back as measured: a job's run is FINISHED with a step measured
        if short:  # each batch short of the batch size, a bad file in it: none to time (measured so until 0.9.11)
            message = (f"no whole batch of {cfg.batch_size} images to time: each batch held a bad file, skipped "
                       f"({counted(len(short), 'short batch', 'short batches')} not timed; "
                       f"{counted(len(skipped), 'file')} named in skipped_files.json)")
        elif skipped:
            message = (f"every item of the dataset was skipped ({counted(len(skipped), 'file')} named in "
                       "skipped_files.json)")
        else:
            message = "its loop ended before any step was measured"
        record.fail("bad_input" if skipped else "error", "\n".join(x for x in (message, child.stderr_tail) if x))
    if record.status == "FAILED" and message.strip():
        record.tags[FAILURE_MESSAGE_TAG] = message.strip().splitlines()[0][:500]
    return _finish(logger, record, cfg, steps, skipped, end, len(short))


def job_dataset(cfg: JobConfig, check_batch: bool = True) -> Any:
    """The job's dataset, scanned and its annotations parsed, once what would refuse the job before
    anything runs is checked: a dataset that cannot be read (an annotation file that is not one, a
    layout without its files), a model of another task than the dataset's layout, a device this
    machine lacks, and (``check_batch``) a dataset smaller than one batch (:func:`check_batch_fits`).
    ``run_job`` measures on it; a loader campaign checks it once, before it opens the store, and each
    setting's batch size against it (until 0.9.6 a dry run said "to measure" of a job that could not run).
    torch is imported only for a CUDA device's check: the measuring child trains, and torch's import cost
    every job on a CPU 2.6 s of its parent's time until 0.9.15."""
    from tracker.data.datasets import open_dataset
    from tracker.zoo import detection_models

    where = f"{cfg.source}: " if cfg.source else ""  # the job file, as load_job names it (unnamed until 0.9.6)
    try:
        dataset = open_dataset(cfg.data_path, cfg.data_format, cfg.image_size)
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None
    detection = cfg.network_spec is None and cfg.model in detection_models()
    if detection != (cfg.data_format != "imagefolder"):
        raise ConfigError(f"{where}model {cfg.model_name} is a {'detection' if detection else 'classification'} model "
                          f"but [data].format {cfg.data_format!r} is a {'classification' if detection else 'detection'} "
                          "layout")
    if cfg.device.startswith("cuda") and not _cuda_available():
        raise ConfigError(f"{where}[training].device {cfg.device} is not available on this machine (no CUDA)")
    if check_batch:
        check_batch_fits(cfg, len(dataset))
    return dataset


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _check_scores(output: Any, classes: int, name: str) -> None:
    """A network of your own trains on the dataset's classes: its output must be one ``(N, C)``
    tensor of scores with a score for each (C at least the classes); else the run fails saying so."""
    import torch

    if not (torch.is_tensor(output) and output.dim() == 2 and output.shape[1] >= classes):
        got = f"a tensor of shape {'x'.join(map(str, output.shape))}" if torch.is_tensor(output) else type(output).__name__
        raise MeasurementError(f"{name} returns {got}: a training job trains it on the dataset's {classes} classes, "
                               f"so it should return one (N, C) tensor of scores with C at least {classes}")


class BadFile(MeasurementError):
    """A file of the dataset that cannot be read, where ``[data].on_error`` is ``fail``: the run's
    reason is ``bad_input`` (another MeasurementError of the loop, the network's, is ``error``)."""


def train(job: dict[str, Any]) -> dict[str, Any]:
    """The measuring child's part of a training job (``worker``, kind ``training``): build the
    model, optimizer and loader, then run the steps, each step and each bad file an event line as
    it is measured. Returns how the loop ended (``failure``: reason and message, or None;
    ``interrupted``), the telemetry and page faults over the steps after the first, the peak
    memory, and the speed probe timed just before the first step and just after the last
    (``speed_probe``, or ``speed_probe_error`` where it failed; neither where no step was measured or
    the job was interrupted). The job's mode settings (allocator, threads) are applied first, before
    anything is built."""
    import resource

    import torch

    from tracker.data.datasets import collate_classification, collate_detection, load_index, open_dataset
    from tracker.errors import is_oom
    from tracker.profile.timing import device_sync
    from tracker.profile.telemetry import TelemetrySampler
    from tracker.profile.memcap import oom_kill_watch
    from tracker.profile.modes import apply_mode
    from tracker.profile.probe import SpeedProbe, probe_payload
    from tracker.profile.worker import (cap_memory, emit_event, inject_fault, loader_fault,
                                        loader_fault_wanted, loader_worker_killed, peak_rss_mb, reset_peak_rss)
    from tracker.zoo import build_model, detection_models

    cfg = JobConfig(**{**job["config"], "data_path": Path(job["config"]["data_path"])})
    apply_mode(cfg.allocator, cfg.threads)
    # as the parent scanned it (``run_job``), else scanned here
    index = job.get("dataset_index")
    dataset = load_index(Path(index)) if index else open_dataset(cfg.data_path, cfg.data_format, cfg.image_size)
    detection = cfg.network_spec is None and cfg.model in detection_models()
    num_classes = len(dataset.classes) + (1 if detection else 0)
    # torch's global generator seeded, as a network's measurement seeds it: the network's weights, its dropout's
    # draws and a detector's sampled boxes are the same in every run of the job, which trains on the same batches
    # (the loader's own generator), so two runs' losses are the same on a CPU. torch draws its initial seed afresh
    # in each process: two runs of a job trained two networks until 0.9.12, their losses apart from the first step
    torch.manual_seed(0)
    if cfg.network_spec is not None:  # a spec file's or a file's network, as the job file was read
        from tracker.zoo.spec import spec_ref

        model = spec_ref(cfg.network_spec).build().to(cfg.device).train()
    else:  # a detector resizes its images to the job's size (build_model's sized_detector; SSD's fixed size
        # too: passing min_size to it raised a TypeError)
        model = build_model(cfg.model, input_size=cfg.image_size if detection else None,
                            num_classes=num_classes).to(cfg.device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.learning_rate, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=cfg.batch_size, shuffle=True, num_workers=cfg.num_workers,
        drop_last=True,  # every step a whole batch (see steps_per_epoch; a smaller dataset is refused)
        prefetch_factor=cfg.prefetch_factor if cfg.num_workers else None,
        collate_fn=collate_detection if detection else collate_classification,
        pin_memory=cfg.device.startswith("cuda"), generator=torch.Generator().manual_seed(0),
        worker_init_fn=loader_fault if loader_fault_wanted() else None)
    sync = device_sync(cfg.device)
    # the machine's speed beside the steps (tracker.profile.probe, since 0.9.11), in the job's mode: one bracket
    # here, before the peaks start afresh, the telemetry and the loop's clock (nothing of it is the job's memory,
    # window or time), one after the last step once its peaks are read. Released between them: none of its tensors
    # is held over the steps, so the job's peak memory (and a memory cap) never counts them (it did until 0.9.12);
    # the second bracket builds the same workload again (seeded: the same weights and input)
    probe = SpeedProbe(cfg.device)
    probe.sample()
    probe.release()
    if cuda := cfg.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(cfg.device)
    peak_reset = reset_peak_rss()  # the CPU peak counts from here: the model, optimizer and loader built
    sampler = TelemetrySampler(interval_s=0.02, gpu_index=(torch.device(cfg.device).index or 0) if cuda else None)
    sampler.start()
    t_start = time.perf_counter()
    first_end_s: float | None = None  # perf_counter at the end of the first step, and of the last
    last_end_s = 0.0
    steps = 0
    skipped: set[str] = set()
    failure: list[str] | None = None
    interrupted = False
    faults_first = faults_last = 0  # minor page faults at the end of the first step, and of the last
    it: Any = None  # the loader's iterator: its workers, if any, live as long as it does
    last_batch: tuple[Any, Any] | None = None  # the last step's batch and its slowest step: the count's (below)
    slowest_ms = 0.0
    cap = cap_memory(cfg.memory_limit_mb, cfg.threads or None, job.get("memory_cgroup"), cfg.device)
    oom_killed = oom_kill_watch()  # a loader worker the kernel kills for memory is an oom (below)
    try:
        for epoch in range(cfg.num_epochs):
            it = iter(loader)
            while not (cfg.max_steps and steps >= cfg.max_steps):
                t0 = time.perf_counter()
                try:
                    images, targets, bad = next(it)
                except StopIteration:
                    break
                t1 = time.perf_counter()
                for b in bad:
                    if cfg.on_error == "fail":  # the failure names it (it was listed as skipped too until 0.9.1)
                        raise BadFile(f"{b.path}: {b.reason}")
                    if b.path not in skipped:  # each bad file once, not once per epoch
                        skipped.add(b.path)
                        emit_event({"skipped": {"file": b.path, "reason": b.reason}})
                if images is None:
                    continue
                if len(images) < cfg.batch_size:  # a bad file left it short: another configuration than the
                    # job's batch size, and one image fails batch norm in training (the whole job until 0.9.11)
                    emit_event({"short_batch": {"images": float(len(images)), "epoch": float(epoch)}})
                    continue
                if detection:
                    images = [im.to(cfg.device, non_blocking=True) for im in images]
                    targets = [{k: v.to(cfg.device) for k, v in t.items()} for t in targets]
                else:
                    images, targets = images.to(cfg.device, non_blocking=True), targets.to(cfg.device)
                sync()
                t2 = time.perf_counter()
                if detection:
                    loss = sum(model(images, targets).values())
                else:
                    output = model(images)
                    if steps == 0 and cfg.network_spec is not None:
                        _check_scores(output, len(dataset.classes), cfg.model_name)
                    loss = criterion(output, targets)
                h3 = time.perf_counter()  # each part's call returned: the host's part ends (timing.measure's split)
                sync()
                t3 = time.perf_counter()
                loss.backward()
                h4 = time.perf_counter()
                sync()
                t4 = time.perf_counter()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                h5 = time.perf_counter()
                sync()
                t5 = time.perf_counter()
                steps += 1
                last_batch, slowest_ms = (images, targets), max(slowest_ms, 1e3 * (t5 - t2))
                emit_event({"step": {"data_wait_ms": 1e3 * (t1 - t0), "h2d_ms": 1e3 * (t2 - t1),
                                     "forward_ms": 1e3 * (t3 - t2), "backward_ms": 1e3 * (t4 - t3),
                                     "optimizer_ms": 1e3 * (t5 - t4), "step_time_ms": 1e3 * (t5 - t0),
                                     "images": float(len(images)), "loss": float(loss.detach()),
                                     "epoch": float(epoch),
                                     # on a device: the host's part of forward, backward and optimizer
                                     **({"host_ms": 1e3 * ((h3 - t2) + (h4 - t3) + (h5 - t4))} if cuda else {})}})
                inject_fault(job, steps)
                faults_last = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                if first_end_s is None:
                    first_end_s, faults_first = t5, faults_last
                last_end_s = t5
            if cfg.max_steps and steps >= cfg.max_steps:
                break
    except KeyboardInterrupt:  # the parent passed Ctrl-C on
        interrupted = True
    except BadFile as exc:
        failure = ["bad_input", str(exc)]
    except MeasurementError as exc:
        failure = ["error", str(exc)]
    except (MemoryError, RuntimeError) as exc:  # torch.OutOfMemoryError is a RuntimeError
        first = (str(exc).splitlines() or [""])[0].strip()
        if loader_worker_killed(exc) and oom_killed():
            failure = ["oom", f"a loader worker was killed by the kernel's out-of-memory killer (the oom_kill count "
                              f"of the job's memory cgroup, or the machine's, rose): {type(exc).__name__}: {first}"]
        else:
            failure = ["oom" if is_oom(exc, capped=bool(cfg.memory_limit_mb)) else "error", f"{type(exc).__name__}: {first}"]
    finally:
        cap_used_mb = cap.used_mb()  # before the cap is lifted
        cap.lift()
        sampler.stop()
    wall_s = time.perf_counter() - t_start
    # Power and energy over the steps after the first: the first one is the warm-up (loader workers
    # starting, CUDA/cuDNN set-up), often longer than all the others together. On an H100, 6 steps of
    # 12 ms after a 1.3 s first step gave 28 J "per step" against 1.4 J (power x step time).
    faults_per_step = None
    if steps >= 2 and first_end_s is not None:
        telemetry = sampler.summary(int(first_end_s * 1e9), int(last_end_s * 1e9))
        telemetry_steps = steps - 1
        if faults_first or faults_last:  # 0 and 0: getrusage counts none here
            faults_per_step = (faults_last - faults_first) / telemetry_steps
    else:
        telemetry, telemetry_steps = sampler.summary(), steps
    memory = {}
    if peak_reset:  # absent where its peak could not be started afresh
        memory["proc_rss_peak_mb"] = peak_rss_mb()
    if cuda:
        memory["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated(cfg.device) / 2**20
        memory["cuda_max_reserved_mb"] = torch.cuda.max_memory_reserved(cfg.device) / 2**20
    if faults_per_step is not None:
        memory["page_faults_per_iter_count"] = faults_per_step
    if cap_used_mb is not None:
        memory["memory_cap_used_mb"] = cap_used_mb
    # The probe's second bracket, after the peaks were read, the telemetry stopped and the cap lifted: of a job
    # that measured a step and was not interrupted (a probe is whole or absent). Loader workers that a job ended
    # by max_steps left prefetching are ended first, so that they do not time themselves into the probe.
    it = None
    speed_probe: dict[str, Any] = {}
    if steps and not interrupted:
        try:
            probe.sample()
        except KeyboardInterrupt:  # Ctrl-C as the probe ran: the job was interrupted, its probe half-taken
            interrupted = True
        else:  # or why the probe failed: the job's measurement stands, without it
            speed_probe = probe_payload(probe)
    tensors: dict[str, Any] = {}
    if last_batch is not None and not interrupted and failure is None and not cuda:  # on a GPU: cuda_max_allocated_mb
        from tracker.profile.tensors import count_step

        # one more step on its last batch, where it fits in the job's step limit (the parent's clock: from its last event)
        tensors = count_step(_job_step(model, optimizer, criterion, detection, last_batch), slowest_ms,
                             cfg.step_timeout_s or None)
        if "tensor_peak_mb" in tensors:
            memory["tensor_peak_mb"] = tensors.pop("tensor_peak_mb")
    # the series over every step, the first too (the charts show the set-up the figures leave out)
    return {"failure": failure, "interrupted": interrupted, "telemetry": telemetry, "telemetry_steps": telemetry_steps,
            "telemetry_series": sampler.series_json(), "memory": memory, "wall_s": wall_s, **speed_probe, **tensors,
            **({"memory_cap": cap.kind} if cap.kind else {})}


def _job_step(model: Any, optimizer: Any, criterion: Any, detection: bool, batch: tuple[Any, Any]) -> Any:
    """One more step of a job on its last batch, as its loop steps (``tensors.tensor_peak_mb``'s)."""
    from tracker.profile.tensors import holding

    images, targets = batch

    def step() -> None:
        loss = sum(model(images, targets).values()) if detection else criterion(model(images), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return holding(step, model, batch, optimizer)


def steps_host_share(steps: list[dict[str, float]]) -> float | None:
    """The share of the steps' forward, backward and optimizer the host spent inside their calls
    (a GPU job's ``host_ms``, ``stats.host_share``); None where a step has none (a CPU job)."""
    from tracker.profile.stats import host_share

    if not steps or any("host_ms" not in s for s in steps):
        return None
    return host_share([s["host_ms"] for s in steps], [s["forward_ms"] + s["backward_ms"] + s["optimizer_ms"] for s in steps])


def _iteration_ms(step: dict[str, float]) -> float:
    """A step's iteration: its time less its data wait (copy, forward, loss, backward, optimizer)."""
    return step["step_time_ms"] - step["data_wait_ms"]


def _epochs(steps: list[dict[str, float]]) -> dict[int, dict[str, float]]:
    """Each epoch's throughput, mean loss and median step time, from its steps (the steady ones:
    an epoch of the set-up step alone has none), by epoch number."""
    out = {}
    for epoch in sorted({int(s["epoch"]) for s in steps}):
        done = [s for s in steps if s["epoch"] == epoch]
        out[epoch] = {"epoch_images_per_s": sum(s["images"] for s in done) / (1e-3 * sum(s["step_time_ms"] for s in done)),
                      "epoch_loss": statistics.fmean(s["loss"] for s in done),
                      "epoch_step_time_ms": statistics.median(s["step_time_ms"] for s in done)}
    return out


def _reused(run: Any, cfg: JobConfig, tracking_uri: str) -> JobResult:
    """A job's FINISHED run read back (``RunLogger.find``) as the result of measuring it, with the
    bad files it skipped (its artifact ``skipped_files.json``, read where its tag counts any)."""
    steps = run.metrics.get("samples_count")
    if steps is not None:  # the steps it measured: those its statistics are of, and its warm-up
        steps += run.metrics.get("warmup_count", 0.0)
    skipped: list[dict[str, str]] = []
    unreadable = None
    if run.tags.get("tracker.skipped_files", "0") != "0":
        skipped, unreadable = _skipped_files(tracking_uri, run.run_id)
    return JobResult.of_run(run.run_id, run.status, int(steps) if steps is not None else 0, run.metrics, skipped,
                            None, cfg, run.params.get("mode"), reused=True,
                            skipped_steps=int(run.tags.get(SKIPPED_STEPS_TAG, "0")), skipped_files_unreadable=unreadable)


def _skipped_files(tracking_uri: str, run_id: str) -> tuple[list[dict[str, str]], str | None]:
    """The bad files a reused run skipped (its artifact ``skipped_files.json``), or none and why they cannot be
    read. One damaged (edited, cut short) leaves the run reused, its figures whole and its skipped files
    unnamed, said so, as a run whose samples are damaged is shown whole beside a note: it was a traceback
    (JSONDecodeError, RecursionError, or a TypeError as the files were listed) until 0.9.15."""
    from tracker.decode import Undecodable, loads_json
    from tracker.errors import DamagedArtifactError
    from tracker.log.artifacts import artifact_bytes

    try:
        text = artifact_bytes(tracking_uri, run_id, SKIPPED_FILES_ARTIFACT)
    except DamagedArtifactError as exc:  # gone from the run's artifacts: MLflow's traceback until 0.9.16
        return [], str(exc)
    try:
        skipped = loads_json(text)
    except Undecodable as exc:
        return [], f"{SKIPPED_FILES_ARTIFACT}: {exc}; cut short or garbled?"
    if not isinstance(skipped, list) or not all(isinstance(s, dict) and isinstance(s.get("file"), str)
                                                and isinstance(s.get("reason"), str) for s in skipped):
        return [], f"{SKIPPED_FILES_ARTIFACT} is not a list of files, each with why it was skipped; edited?"
    return skipped, None


def _finish(logger: Any, record: Any, cfg: JobConfig, steps: list[dict[str, float]], skipped: list[dict[str, str]],
            end: dict[str, Any], short: int = 0) -> JobResult:
    """Log the run: the steps the child streamed, and what its last line said (``end``: empty where
    the child died, so its peak memory, telemetry and loop time are absent, not guessed); ``short``:
    the batches a bad file left short of the batch size, skipped rather than timed."""
    from tracker.log.samples import SAMPLES_ARTIFACT, samples_json
    from tracker.profile.probe import probe_record
    from tracker.profile.records import add_system_metrics, spread_metrics, telemetry_metrics, tensor_peak_tags
    from tracker.profile.stats import summarize

    if record.status == "FINISHED":  # what stopped it: its max_steps, or its data ran out first (epochs)
        reached = bool(cfg.max_steps) and len(steps) >= cfg.max_steps  # (it said max_steps of those until 0.9.1)
        record.tags["tracker.stop_reason"] = "max_steps" if reached else "epochs"
    # A job that did not end so (FAILED, KILLED) has none, as a network's failed run: its samples end on its
    # tracker.failure_reason. Until 0.9.6 it was tagged as if it had: "epochs" on a Ctrl-C or a killed
    # child, whose samples said "interrupted" or "killed", "max_steps" on one ended before any step.
    if steps:
        # the first step is the set-up (loader workers start, the allocator and the kernels warm up):
        # kept in the step history and as the samples' warm-up, left out of every statistic, as the
        # telemetry leaves it out; a job of one step has nothing else to go on
        warmup, steady = (steps[:WARMUP_STEPS], steps[WARMUP_STEPS:]) if len(steps) > WARMUP_STEPS else ([], steps)
        total_ms = sum(s["step_time_ms"] for s in steady)
        images = sum(s["images"] for s in steady)
        summary = {"step_time_ms": statistics.median(s["step_time_ms"] for s in steady),
                   **{p: statistics.median(s[p] for s in steady) for p in STEP_PARTS},
                   # the iteration itself (copy, forward, loss, backward, optimizer), as training runs measure it
                   "latency_ms": statistics.median(_iteration_ms(s) for s in steady),
                   "data_wait_frac": sum(s["data_wait_ms"] for s in steady) / total_ms,
                   "throughput_per_s": images / (1e-3 * total_ms), "loss": steps[-1]["loss"],
                   "samples_count": float(len(steady)), "warmup_count": float(len(warmup))}
        # the spread of its iterations, as a network run's (no CI from one; since 0.9.0: jobs had none,
        # so runs compare and the fingerprints' CI filter could not judge them)
        spread = spread_metrics(summarize([_iteration_ms(s) for s in steady]))
        summary.update({k: v for k, v in spread.items() if k not in summary})
        if (share := steps_host_share(steady)) is not None:
            summary["host_share_pct"] = 100.0 * share
        if "wall_s" in end:
            summary["measure_time_s"] = end["wall_s"]
        memory = end.get("memory", {})
        summary.update(memory)
        peak = memory.get("cuda_max_allocated_mb" if cfg.device.startswith("cuda") else "proc_rss_peak_mb")
        if peak is not None:
            summary["peak_mem_mb"] = peak
        if end.get("telemetry"):
            summary.update({k: v for k, v in telemetry_metrics(end["telemetry"], end["telemetry_steps"]).items()
                            if k not in summary})
        # the machine's speed beside the steps (tracker.profile.probe, since 0.9.11), as a network run's
        probe_figures, probe_tags = probe_record(end)  # or why the probe failed: the job stands, without it
        summary.update(probe_figures)
        record.tags.update(probe_tags)
        record.tags.update(tensor_peak_tags(summary, end))  # its tensors at most, one step more (since 0.9.31)
        record.metrics.update(summary)
        record.description += (f" Median iteration {summary['latency_ms']:.3f} ms (step less its data wait; median "
                               f"step {summary['step_time_ms']:.3f} ms, {100 * summary['data_wait_frac']:.1f} % of the "
                               f"time waiting for data) over {len(steady)} steps after {counted(len(warmup), 'set-up step')}.")
        # its iterations as raw samples, one a block (a step is long, and steps follow one another as
        # network runs' blocks do): what ``runs compare`` tests two jobs on
        record.artifacts[SAMPLES_ARTIFACT] = samples_json({
            "block_n": 1, "stop_reason": record.tags.get("tracker.failure_reason") or record.tags["tracker.stop_reason"],
            "warmup_ms": [_iteration_ms(s) for s in warmup], "samples_ms": [_iteration_ms(s) for s in steady]},
            end.get("speed_probe"))
        per_step = {f"step_{p}": p for p in STEP_PARTS} | {"step_total_ms": "step_time_ms", "step_loss": "loss"}
        record.history = {name: [(i, s[key]) for i, s in enumerate(steps)] for name, key in per_step.items()}
        # of the steady steps, as every statistic (until 0.9.2 the first epoch's counted the set-up step)
        epochs = _epochs(steady)
        for key in ("epoch_images_per_s", "epoch_loss", "epoch_step_time_ms"):
            record.history[key] = [(epoch, e[key]) for epoch, e in epochs.items()]
        add_system_metrics(record, end.get("telemetry_series"))
    if skipped:
        record.artifacts[SKIPPED_FILES_ARTIFACT] = json.dumps(skipped, indent=2)
        record.tags["tracker.skipped_files"] = str(len(skipped))
    if short:  # as the files are counted: a tag where any (since 0.9.11)
        record.tags[SKIPPED_STEPS_TAG] = str(short)
        record.description += (f" {counted(short, 'step')} skipped, not timed: a bad file left "
                               f"{'its batch' if short == 1 else 'each batch'} short of {cfg.batch_size} images.")
    record.artifacts["job_config.json"] = json.dumps({k: str(v) for k, v in asdict(cfg).items() if k != "network_spec"},
                                                     indent=2)
    if cfg.network_spec is not None:
        from tracker.profile.api import keep_own_code
        from tracker.zoo.spec import is_own_spec

        keep_own_code(record, cfg.network_spec)  # its code as trained (its own, or its base's), as profile keeps it
        if not is_own_spec(cfg.network_spec):  # a spec file's network: the spec as read
            record.artifacts["network_spec.json"] = json.dumps(cfg.network_spec, indent=2)
    try:
        logger.log([record])
    except KeyboardInterrupt as exc:
        from tracker.errors import Terminated

        # a second Ctrl-C as the store took the KILLED run of a job the first ended, acted on once the store
        # had it whole (``logged``; RunLogger.log): said as the first is, the job's line and status 130, not
        # main's "what was logged before is kept" of a run rolled back (lost until 0.9.8)
        if record.status != "KILLED" or isinstance(exc, Terminated) or getattr(exc, "logged", None) is None:
            raise
    result = JobResult.of_run(record.run_id, record.status, len(steps), record.metrics, skipped,
                              record.tags.get("tracker.failure_reason"), cfg, record.params.get("mode"), skipped_steps=short)
    from tracker.log.record import FAILURE_MESSAGE_TAG

    result.failure_message = record.tags.get(FAILURE_MESSAGE_TAG)
    return result
