-- What the fingerprints train on: each latest FINISHED measurement (one row per
-- configuration, phase inference or training) joined with its network's features, the
-- batch-scaled work (FLOPs and activation bytes times batch size) and the targets
-- latency_ms, peak_mem_mb, network_mem_mb (on a CPU, the part of the peak the network added to
-- the process; since 0.9.1), tensor_peak_mb (on a CPU, the most bytes of its tensors alive at once
-- over a step; since 0.9.34), power_w, energy_per_iter_j and gpu_util_pct (the last three where
-- the device reports them).
SELECT
    m.run_id, m.experiment, m.phase, m.device, m.device_name, m.mode, m.precision, m.threads,
    m.model, m.model_hash, m.batch_size,
    f.* EXCLUDE (model_hash, model),
    CAST(f.flops * m.batch_size AS DOUBLE) AS batch_flops,
    CAST(f.activation_bytes * m.batch_size AS DOUBLE) AS batch_activation_bytes,
    CAST(f.saved_activation_bytes * m.batch_size AS DOUBLE) AS batch_saved_activation_bytes,
    CAST(f.kept_activation_bytes * m.batch_size AS DOUBLE) AS batch_kept_activation_bytes,
    CAST(f.largest_activation_bytes * m.batch_size AS DOUBLE) AS batch_largest_activation_bytes,
    CAST(f.live_activation_bytes * m.batch_size AS DOUBLE) AS batch_live_activation_bytes,
    m.latency_ms, m.peak_mem_mb, m.network_mem_mb, m.tensor_peak_mb, m.power_w, m.energy_per_iter_j, m.gpu_util_pct, m.latency_ci_rel,
    m.samples_count
FROM latest_measurements m
JOIN network_features f USING (model_hash)
