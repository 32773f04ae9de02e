-- Latency, throughput and memory versus batch size for each network at an input size, phase, device,
-- mode, number format (precision: float32, float16, bfloat16) and memory cap (memory_limit_mb,
-- NULL: none), with the latency per image and the growth against the smallest batch measured.
-- Training jobs (a data loader: data_wait_frac) are left out: their throughput counts the wait
-- for data and their settings are the loader's (the data_loading view); since 0.9.0, when
-- input_size and memory_limit_mb came too.
SELECT
    model, model_hash, CAST(input_size AS BIGINT) AS input_size, phase, device_name, device, mode, precision,
    CAST(memory_limit_mb AS DOUBLE) AS memory_limit_mb, batch_size,
    latency_ms, latency_ci_rel, throughput_per_s, peak_mem_mb,
    latency_ms / batch_size AS latency_per_image_ms,
    latency_ms / first_value(latency_ms) OVER w AS latency_vs_smallest_batch,
    peak_mem_mb - first_value(peak_mem_mb) OVER w AS extra_mem_vs_smallest_batch_mb
FROM latest_measurements
WHERE run_id NOT IN (SELECT run_id FROM training_runs WHERE data_wait_frac IS NOT NULL)
WINDOW w AS (PARTITION BY model_hash, phase, device_name, device, mode, precision, memory_limit_mb ORDER BY batch_size)
ORDER BY model, input_size, phase, device_name, mode, precision, memory_limit_mb, batch_size
