-- Layer-wise latency of each FINISHED network run: every nested layer run with its share
-- of the sum of layer latencies, and the whole-network latency beside it, so the sum of
-- isolated layers can be compared with the network measured whole. host_share_pct: on a GPU, the
-- share of the layer's time the host spent launching it (near 100: bound by the host's CPU, not
-- the device); NULL on a CPU and for runs before tracker 0.8.4. layer_kind: module, or function
-- (the torch functions a module called between its layers, replayed; since 0.8.6, before which
-- layers were modules only: NULL there reads module).
SELECT
    n.run_id AS network_run_id, n.model, n.model_hash, n.batch_size, n.phase, n.device, n.mode,
    l.run_id AS layer_run_id, l.layer_index, l.layer_name,
    CAST(COALESCE(l.layer_kind, 'module') AS VARCHAR) AS layer_kind, l.op_type, l.input_shape, l.output_shape,
    l.latency_ms, l.latency_ci_rel, l.samples_count, l.power_w, l.host_share_pct,
    100.0 * l.latency_ms / sum(l.latency_ms) OVER (PARTITION BY n.run_id) AS share_of_layers_pct,
    n.latency_ms AS network_latency_ms,
    sum(l.latency_ms) OVER (PARTITION BY n.run_id) AS sum_of_layers_ms,
    sum(l.latency_ms) OVER (PARTITION BY n.run_id) / n.latency_ms AS sum_of_layers_ratio
FROM layer_runs l
JOIN network_runs n ON n.run_id = l.parent_run_id
WHERE l.status = 'FINISHED' AND n.status = 'FINISHED'
