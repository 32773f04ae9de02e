"""What the child process measures: one job, from model build to raw samples.

A job is plain JSON (see ``tracker.profile.child.Job``); the result is plain JSON holding
the raw timing samples, memory peaks, the telemetry summary over the sampling window, the
device mode and the network's description. Statistics are derived later from the raw
samples, in the parent, by ``tracker.profile.stats``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tracker.errors import MeasurementError
from tracker.profile.network import output_tensors
from tracker.profile.stats import Stopping
from tracker.profile.tensors import holding
from tracker.profile.timing import Timing, device_sync, measure
from tracker.profile.worker import current_rss_mb, give_back_freed, peak_rss_mb, reset_peak_rss


def _timing_json(t: Timing) -> dict[str, Any]:
    out = {"samples_ms": t.samples_ms, "warmup_ms": t.warmup_ms, "stop_reason": t.stop_reason, "elapsed_s": t.elapsed_s,
           "block_n": t.block_n}
    if t.minor_faults is not None:
        out["minor_faults"] = t.minor_faults
    if t.host_ms is not None:
        out["host_ms"] = t.host_ms
    return out


def training_loss(output: Any, device: str) -> Callable[[Any], Any]:
    """The loss a training step takes of a network's ``output`` (its first, the shapes of every
    later one): cross-entropy of each floating-point tensor that carries gradients, classes along
    its second dimension, against fixed random classes (``(N, C)``: one a sample, as an image
    classifier is trained; ``(N, C, H, W)``: one a pixel, as a segmentation network), and for a
    tensor of one dimension or none its mean square; the sum of them, so that backward runs
    through everything the network returns. Before 0.8.5 the output had to be one ``(N, C)``
    tensor: a network returning a tuple or a dict could not be measured in training."""
    import torch

    tensors = output_tensors(output)
    if not any(t.is_floating_point() and t.requires_grad for t in tensors):
        raise MeasurementError("the network returns no floating-point tensor that carries gradients: "
                               "nothing to train it on")
    generator = torch.Generator().manual_seed(0)
    targets = [torch.randint(0, t.shape[1], (t.shape[0], *t.shape[2:]), generator=generator).to(device)
               if t.is_floating_point() and t.requires_grad and t.dim() >= 2 else None for t in tensors]

    def loss(out: Any) -> Any:
        total = None
        for t, y in zip(output_tensors(out), targets):
            if not (t.is_floating_point() and t.requires_grad):
                continue
            t = t.float()  # the loss in float32 whatever the network runs in (--dtype): a no-op for float32
            term = torch.nn.functional.cross_entropy(t, y) if y is not None else t.pow(2).mean()
            total = term if total is None else total + term
        return total

    return loss


#: Boxes of each image of a detection network's training step (``detection_targets``).
BOXES_PER_IMAGE = 3


def detection_targets(batch_size: int, size: int, keypoints: int | None, masks: bool, device: str) -> list[dict[str, Any]]:
    """Fixed random targets of a torchvision detection network's training step, one dict an image
    of ``size`` pixels square: ``BOXES_PER_IMAGE`` boxes (each a quarter to half the image on a
    side, within it) of class 1, and where the network asks for them, a mask filling each box
    (Mask R-CNN) or ``keypoints`` visible points inside it (Keypoint R-CNN)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    out = []
    for _ in range(batch_size):
        wh = size * (0.25 + 0.25 * torch.rand(BOXES_PER_IMAGE, 2, generator=generator))
        xy = (size - wh) * torch.rand(BOXES_PER_IMAGE, 2, generator=generator)
        boxes = torch.cat([xy, xy + wh], dim=1)
        target = {"boxes": boxes, "labels": torch.ones(BOXES_PER_IMAGE, dtype=torch.int64)}
        if masks:
            grid = torch.arange(size, dtype=torch.float32)
            inside_x = (grid >= boxes[:, None, 0]) & (grid < boxes[:, None, 2])
            inside_y = (grid >= boxes[:, None, 1]) & (grid < boxes[:, None, 3])
            target["masks"] = (inside_y[:, :, None] & inside_x[:, None, :]).to(torch.uint8)
        if keypoints:
            points = boxes[:, None, :2] + wh[:, None, :] * torch.rand(BOXES_PER_IMAGE, keypoints, 2, generator=generator)
            target["keypoints"] = torch.cat([points, torch.ones(BOXES_PER_IMAGE, keypoints, 1)], dim=2)
        out.append({k: v.to(device) for k, v in target.items()})
    return out


def _detection_step(model: Any, spec: Any) -> Any:
    """A torchvision detection network's training step: its images and ``detection_targets`` in,
    the sum of the losses it returns backward, then the optimizer (as ``profile training``'s job on
    a dataset; here without one, so that ``profile network --phase training``, its boundary and
    campaigns measure detectors too, since 0.8.5)."""
    import torch

    from tracker.profile.network import example_input

    heads = getattr(model, "roi_heads", None)
    predictor = getattr(heads, "keypoint_predictor", None)
    keypoints = getattr(predictor, "kps_score_lowres", None)
    targets = detection_targets(spec.batch_size, spec.input_size, keypoints.out_channels if keypoints is not None else None,
                                getattr(heads, "mask_predictor", None) is not None, spec.device)
    images = list(example_input(spec))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        sum(model(images, targets).values()).backward()
        optimizer.step()

    return holding(train_step, model, (images, targets), optimizer)


def _step(model: Any, spec: Any, phase: str, detection: bool = False) -> Any:
    """One iteration: inference, or forward + loss + backward + optimizer step (the loss:
    ``training_loss``, its targets made from the first step's output, a warm-up step; a detection
    network's: ``_detection_step``)."""
    import torch

    from tracker.profile.network import example_input

    if detection and phase != "inference":
        return _detection_step(model, spec)
    x = example_input(spec)
    if phase == "inference":
        model.eval()

        def infer() -> None:
            with torch.inference_mode():
                model(x)

        return holding(infer, model, x)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion: list[Callable[[Any], Any]] = []

    def train_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        if not criterion:
            criterion.append(training_loss(out, spec.device))
        criterion[0](out).backward()
        optimizer.step()

    return holding(train_step, model, x, optimizer)


def build_once(ref: Any, spec: Any) -> None:
    """Build the network once in its number format and let it go, before what the process holds is
    read as its baseline (``network_mem_mb``, since 0.9.26). What a first build leaves behind stays
    with the process: code run for the first time, Python's and the allocator's caches, and for a
    pruned network what planning its widths took (its unpruned base built and run once at batch 1).
    A network deployed pays none of that. Counted as the network's until 0.9.26: resnet18 pruned 25 %
    at batch 1 had 51 MB of its own (the mean of five runs) for 26 MB of weights and 5 MB of
    activations alive at once, 44 MB now; regnet_y_400mf 41 to 43 MB, 37 now. A quantized network's
    first quantization (torch.ao's FX graph mode, traced, observed and converted) left 54 MB behind
    for resnet18, counted until 0.9.27. The run's random numbers are as they were: its network's
    weights are the same."""
    import torch

    from tracker.profile.network import in_format

    with torch.random.fork_rng(devices=[]):
        in_format(ref.build(spec.input_size), spec)  # let go at once


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch

    started = time.monotonic()  # the parent's time limit (job["time_limit_s"]) counts from about here

    from tracker.profile.modes import enter_mode
    from tracker.profile.network import NetworkSpec, in_format, preload_own_code, profile_layers
    from tracker.profile.probe import SpeedProbe, probe_json, probe_payload
    from tracker.profile.telemetry import TelemetrySampler
    from tracker.zoo import resolve

    # The allocator before anything allocates (the thread pool, the network), as the job and
    # workload children do: all their memory is kept the same way.
    mode = enter_mode(job)
    device = job.get("device", "cpu")
    # the machine's speed beside the window (tracker.profile.probe), built before the run's seed is set;
    # released after each bracket, before what the process held is read: none of its tensors is held over
    # the network's window or its layers' (until 0.9.12 they were, inside peak_rss_mb: about 0.5 MB on a CPU,
    # 26 MB of host memory beside a GPU), and the next bracket builds the same workload again
    probe = SpeedProbe(device)
    torch.manual_seed(0)
    if job.get("network_spec") is not None:  # the spec as planned, not the file as it may be now
        from tracker.zoo.spec import spec_ref

        ref = spec_ref(job["network_spec"])
    else:
        ref = resolve(job["model"])
    spec = NetworkSpec(
        model=ref.name,
        batch_size=int(job["batch_size"]),
        input_size=int(job.get("input_size") or ref.input_size),
        device=device,
        precision=job.get("precision", "float32"),
        phase=job.get("phase", "inference"),
        in_channels=ref.in_channels,
        input_shape=ref.input_shape,
        input_vocab=ref.input_vocab,
    )
    preload_own_code(spec.phase, spec.precision)  # the worker did, before its cap; run in-process, here
    probe.sample()  # before: the probe's own warm-up is its first, untimed run
    probe.release()
    # what the process held before the network was built (the interpreter, torch, the thread pool), the
    # probe's freed memory handed back first, as the peak's reset does: its peak over this is the network's
    # own, network_mem_mb (since 0.9.0; until 0.9.12 both held the probe, over the whole window)
    held_mb = None
    if not device.startswith("cuda"):
        build_once(ref, spec)
        give_back_freed()
        held_mb = current_rss_mb()
    model = ref.build(spec.input_size)  # a detector computes at it (0.8.5)
    model = in_format(model, spec)  # cast to its number format, or quantized (int8)
    rule = Stopping(**job.get("rule", {}))
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    step = _step(model, spec, spec.phase, detection=ref.is_detection)
    peak_reset = reset_peak_rss()  # the network built and on its device: its own peak from here
    gpu_index = (torch.device(device).index or 0) if cuda else None
    with TelemetrySampler(interval_s=job.get("telemetry_interval_s", 0.02), settle_s=job.get("settle_s", 0.0),
                          gpu_index=gpu_index) as sampler:
        timing = measure(step, rule, device_sync(device), split_host=cuda)
    memory: dict[str, float] = {}
    if peak_reset:  # absent where its peak could not be started afresh
        memory["peak_rss_mb"] = peak_rss_mb()
        if held_mb is not None:
            memory["network_mem_mb"] = max(0.0, memory["peak_rss_mb"] - held_mb)
    if cuda:
        memory["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        memory["cuda_max_reserved_mb"] = torch.cuda.max_memory_reserved(device) / 2**20
    after_network = probe.sample()  # after the peaks were read
    probe.release()  # the trace and the layers hold none of it either
    tensors: dict[str, Any] = {}
    if spec.precision == "int8":  # packed weights (torch.ao's LinearPackedParams, ...) are no tensors
        tensors = {"tensor_peak_error": "not counted in int8: a quantized network's weights are packed objects, "
                                        "not tensors it sees"}
    elif not cuda:  # the tensors' own peak, one step more (on a GPU, cuda_max_allocated_mb is that figure)
        from tracker.profile.tensors import count_step

        tensors = count_step(step, max(timing.samples_ms, default=0.0), job.get("time_limit_s"),
                             time.monotonic() - started)
        if "tensor_peak_mb" in tensors:
            memory["tensor_peak_mb"] = tensors.pop("tensor_peak_mb")
    result: dict[str, Any] = {
        "model_name": ref.name,
        "spec": asdict(spec),
        "mode": {"device": mode.device, "mode_id": mode.mode_id, "params": mode.params},
        "timing": _timing_json(timing),
        "memory": memory,
        "telemetry": sampler.summary(*timing.window_ns),
        "telemetry_series": sampler.series_json(*timing.window_ns),
    }
    result.update(probe_payload(probe))  # or why the probe failed: the measurement stands, without it
    result.update(tensors)  # why its tensors were not counted, where they were not
    if job.get("trace_dir"):  # after the measurement, its peak and telemetry: the profiler costs them nothing
        from tracker.profile.trace import trace_step
        from tracker.profile.worker import injected_fault

        try:
            if injected_fault() == "notrace":
                raise RuntimeError("injected: the profiler failed (TRACKER_FAULT)")
            result["trace"] = trace_step(step, device_sync(device), cuda, job["trace_dir"])
        except Exception as exc:  # noqa: BLE001  a trace that fails loses the trace, not the measurement
            result["trace_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    if job.get("layers") and spec.phase == "inference":
        from tracker.profile.worker import emit_event, injected_fault

        # the network's measurement, for a parent interrupted while the layers are measured (lost until 0.9.3)
        emit_event({"network": result})
        if injected_fault() == "layers:hang":  # for tests: a parent interrupted while the layers are measured
            import os
            import time
            from pathlib import Path

            Path(os.environ["TRACKER_FAULT_MARK"]).touch()
            time.sleep(3600)
        if injected_fault() == "layers:kill":  # for tests: a child killed from outside while the layers are measured
            import os
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        layer_rule = Stopping(**job.get("layer_rule", job.get("rule", {})))
        with TelemetrySampler(interval_s=job.get("telemetry_interval_s", 0.02), gpu_index=gpu_index) as layer_sampler:
            calls = profile_layers(model, spec, layer_rule)
        after_layers = probe.sample()  # the layers' window is bracketed by the probe after the network and this one
        if after_network and after_layers:
            result["layers_speed_probe"] = probe_json(after_network + after_layers)
        result["layers"] = [
            {
                "index": c.index,
                "name": c.name,
                "op_type": c.op_type,
                "kind": c.kind,
                "input_shape": c.input_shape,
                "output_shape": c.output_shape,
                "timing": _timing_json(c.timing),
                "telemetry": layer_sampler.summary(*c.timing.window_ns),
            }
            for c in calls
            if c.timing is not None
        ]
    return result
