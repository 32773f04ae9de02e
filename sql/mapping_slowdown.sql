-- Multi-DNN interference (tracker mapping run): every network of the latest FINISHED run of
-- each workload, with its split, devices and figures in the workload, next to its throughput
-- alone (the latest inference network run of the same model and batch size on the same device
-- and host, in float32 at the same input size as a workload runs it, the same device mode
-- preferred) and the slowdown from sharing (alone / shared). Workloads of tracker before 0.8.9 do
-- not record their networks' input size: any size is taken for them.
-- A network cut across two different devices has no single-device baseline: NULL.
-- alone_mode (since 0.9.1): the device mode of that baseline, which may differ from the
-- workload's where no run of its mode is there (threads change a CPU's throughput: compare
-- them where alone_mode = mode).
WITH workloads AS (
    SELECT m.run_id, m.mapping, m.num_networks, m.batch_size, m.mode, m.duration_s, m.end_time, e.host
    FROM mapping_runs m
    LEFT JOIN environments e USING (run_id)
    WHERE m.status = 'FINISHED'
    QUALIFY row_number() OVER (PARTITION BY m.config_key ORDER BY m.end_time DESC, m.run_id) = 1
),
net_params AS (
    SELECT p.run_id,
           CAST(regexp_extract(p.key, '^net([0-9]+)[.]', 1) AS INTEGER) AS net_index,
           regexp_extract(p.key, '^net[0-9]+[.](.+)$', 1) AS field,
           p.value
    FROM params p
    WHERE p.run_id IN (SELECT run_id FROM workloads) AND regexp_matches(p.key, '^net[0-9]+[.]')
),
net_metrics AS (
    SELECT m.run_id,
           CAST(regexp_extract(m.key, '^net([0-9]+)[.]', 1) AS INTEGER) AS net_index,
           regexp_extract(m.key, '^net[0-9]+[.](.+)$', 1) AS field,
           arg_max(m.value, m.step) AS value
    FROM metrics m
    WHERE m.run_id IN (SELECT run_id FROM workloads) AND regexp_matches(m.key, '^net[0-9]+[.]')
    GROUP BY ALL
),
nets AS (
    SELECT p.run_id, p.net_index,
           any_value(p.value) FILTER (WHERE p.field = 'model') AS model,
           CAST(any_value(p.value) FILTER (WHERE p.field = 'input_size') AS BIGINT) AS input_size,
           CAST(any_value(p.value) FILTER (WHERE p.field = 'split') AS BIGINT) AS split,
           CAST(any_value(p.value) FILTER (WHERE p.field = 'layers') AS BIGINT) AS layers,
           any_value(p.value) FILTER (WHERE p.field = 'devices') AS devices
    FROM net_params p
    GROUP BY p.run_id, p.net_index
),
shared AS (
    SELECT w.*, n.net_index, n.model, n.input_size, n.split, n.layers, n.devices,
           CASE WHEN n.split = 0 THEN split_part(n.devices, '>', 2)
                WHEN n.split = n.layers THEN split_part(n.devices, '>', 1)
                WHEN split_part(n.devices, '>', 1) = split_part(n.devices, '>', 2) THEN split_part(n.devices, '>', 1)
           END AS single_device,
           CAST(any_value(f.value) FILTER (WHERE f.field = 'inf_count') AS BIGINT) AS inf_count,
           CAST(any_value(f.value) FILTER (WHERE f.field = 'avg_inf_ms') AS DOUBLE) AS avg_inf_ms,
           CAST(any_value(f.value) FILTER (WHERE f.field = 'avg_transfer_ms') AS DOUBLE) AS avg_transfer_ms,
           CAST(any_value(f.value) FILTER (WHERE f.field = 'throughput_per_s') AS DOUBLE) AS throughput_per_s
    FROM workloads w
    JOIN nets n USING (run_id)
    LEFT JOIN net_metrics f ON f.run_id = n.run_id AND f.net_index = n.net_index
    GROUP BY ALL
),
alone AS (
    SELECT l.run_id AS alone_run_id, l.model, CAST(l.batch_size AS BIGINT) AS batch_size,
           CAST(l.input_size AS BIGINT) AS input_size, l.device, l.mode, l.host,
           CAST(l.throughput_per_s AS DOUBLE) AS alone_throughput_per_s, l.end_time AS alone_end_time
    FROM latest_measurements l
    WHERE l.kind = CAST('network' AS VARCHAR) AND l.phase = CAST('inference' AS VARCHAR)
      AND l.precision = CAST('float32' AS VARCHAR)
)
SELECT
    s.run_id, s.mapping, s.num_networks, s.batch_size, s.mode, s.host,
    s.net_index, s.model, s.input_size, s.split, s.layers, s.devices,
    s.inf_count, s.avg_inf_ms, s.avg_transfer_ms, s.throughput_per_s,
    a.alone_throughput_per_s,
    a.alone_throughput_per_s / s.throughput_per_s AS slowdown,
    a.alone_run_id, a.mode AS alone_mode
FROM shared s
LEFT JOIN alone a
    ON a.model = s.model AND a.batch_size = s.batch_size AND a.device = s.single_device
   AND a.host IS NOT DISTINCT FROM s.host AND (s.input_size IS NULL OR a.input_size = s.input_size)
QUALIFY row_number() OVER (PARTITION BY s.run_id, s.net_index
                           ORDER BY (a.mode = s.mode) DESC NULLS LAST, a.alone_end_time DESC NULLS LAST) = 1
ORDER BY s.end_time, s.run_id, s.net_index
