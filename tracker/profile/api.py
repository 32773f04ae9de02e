"""Library entry points for profiling: measure, record, skip what is already measured."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracker.log.logger import RunLogger
from tracker.log.record import RunRecord, now_ms
from tracker.profile.network import NetworkSpec, profile_inference, profile_layers
from tracker.profile.stats import Stopping


@dataclass
class ProfileResult:
    network: RunRecord
    layers: list[RunRecord]
    reused: bool

    def as_dict(self) -> dict:
        m = self.network.metrics
        out = {
            "run_id": self.network.run_id,
            "model": self.network.params["model"],
            "batch_size": self.network.params["batch_size"],
            "status": self.network.status,
            "reused": self.reused,
            "latency_ms": m.get("latency_ms"),
            "ci_rel": m.get("latency_ci_rel"),
            "samples": int(m["samples_count"]) if "samples_count" in m else None,
            "throughput_per_s": m.get("throughput_per_s"),
            "stop_reason": self.network.tags.get("tracker.stop_reason"),
        }
        if self.layers:
            out["sum_of_layers_ratio"] = m.get("sum_of_layers_ratio")
            out["layers"] = [
                {
                    "run_id": r.run_id,
                    "index": r.params["layer_index"],
                    "name": r.params["layer_name"],
                    "op_type": r.params["op_type"],
                    "latency_ms": r.metrics["latency_ms"],
                    "ci_rel": r.metrics["latency_ci_rel"],
                }
                for r in self.layers
            ]
        return out


def profile_network(
    logger: RunLogger,
    spec: NetworkSpec,
    rule: Stopping,
    layers: bool = False,
    layer_rule: Stopping | None = None,
    reuse: bool = True,
) -> ProfileResult:
    """Measure one network configuration (and its layers) and log it, unless already measured."""
    import json

    import torch

    from tracker.describe.graph import describe_module
    from tracker.environment import software_versions
    from tracker.profile.records import cpu_mode_id, key_fields, layer_records, network_record
    from tracker.zoo import resolve

    ref = resolve(spec.model)
    model = ref.build()
    spec = replace(spec, model=ref.name)  # a spec file is recorded by its network's name
    description = describe_module(model, spec.model, spec.input_size)
    model_hash = description.description_hash
    mode = cpu_mode_id() if spec.device == "cpu" else f"{spec.device}-default"
    versions = software_versions()
    if reuse:
        probe = RunRecord(kind="network", name="", key_fields=key_fields(spec, model_hash, mode, versions))
        existing = logger.find(probe.config_key)
        if existing is not None:
            return ProfileResult(existing, [], reused=True)
    torch.manual_seed(0)
    start = now_ms()
    timing = profile_inference(model, spec, rule)
    net = network_record(spec, model_hash, mode, rule, timing, versions, start)
    net.artifacts["description/graph.json"] = description.graph_artifact()
    net.artifacts["description/description.json"] = json.dumps(description.to_json())
    lrecs = []
    if layers:
        calls = profile_layers(model, spec, layer_rule or rule)
        lrecs = layer_records(net, spec, model_hash, mode, calls, versions)
    logger.log([net, *lrecs])
    return ProfileResult(net, lrecs, reused=False)
