-- What the layer-level fingerprint trains on, after nn-Meter: each FINISHED layer run of
-- the latest measurement of its configuration that ran its layers (latest_layer_measurements: since
-- tracker 0.9.11 a later measurement of it whole only does not hide them), parent_run_id that
-- measurement, config_run_id the configuration's latest measurement (its row in measurement_features,
-- the same run unless it was measured whole again later), joined with its module's node features (matched
-- by the module's qualified name, or by its node name in warehouses loaded before node rows
-- kept it; a module called twice matches its first call) and the batch-scaled
-- work of the layer, with the layer's latency_ms as the target. Module layers only: a function
-- layer (the torch functions a module called between its layers) has no node row of its own, and
-- prediction sums module calls (the calibration's terms per call and per MB stand for the rest).
SELECT
    l.run_id, l.parent_run_id, m.config_run_id, m.model, m.model_hash, m.phase, m.device, m.device_name, m.mode, m.batch_size,
    l.layer_index, n.kind, n.category,
    CAST(m.batch_size AS DOUBLE) AS layer_batch_size,
    CAST(n.in_channels AS DOUBLE) AS in_channels,
    CAST(n.out_channels AS DOUBLE) AS out_channels,
    CAST(n.out_h AS DOUBLE) AS out_h,
    CAST(n.kernel_h AS DOUBLE) AS kernel_h,
    CAST(n.stride_h AS DOUBLE) AS stride_h,
    CAST(n.groups AS DOUBLE) AS groups,
    CAST(n.weight_bytes AS DOUBLE) AS layer_weight_bytes,
    CAST(n.flops * m.batch_size AS DOUBLE) AS layer_batch_flops,
    CAST(n.elementwise_ops * m.batch_size AS DOUBLE) AS layer_batch_elementwise_ops,
    CAST((n.activation_in_bytes + n.activation_out_bytes) * m.batch_size + n.weight_bytes AS DOUBLE) AS layer_batch_bytes,
    CAST(n.activation_out_bytes * m.batch_size AS DOUBLE) AS layer_batch_out_bytes,
    l.latency_ms
FROM layer_runs l
JOIN latest_layer_measurements m ON m.run_id = l.parent_run_id
JOIN node_features n ON n.model_hash = l.model_hash
    AND (n.module_target = l.layer_name OR (n.module_target IS NULL AND n.module_name = replace(l.layer_name, '.', '_')))
WHERE l.status = 'FINISHED' AND COALESCE(l.layer_kind, 'module') = 'module'
QUALIFY row_number() OVER (PARTITION BY l.run_id ORDER BY n.node_index) = 1
