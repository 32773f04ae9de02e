-- Latency, throughput and memory versus batch size for each network, phase, device, mode and
-- number format (precision: float32, float16, bfloat16), with the latency per image and the growth against the smallest batch measured.
SELECT
    model, model_hash, phase, device_name, device, mode, precision, batch_size,
    latency_ms, latency_ci_rel, throughput_per_s, peak_mem_mb,
    latency_ms / batch_size AS latency_per_image_ms,
    latency_ms / first_value(latency_ms) OVER w AS latency_vs_smallest_batch,
    peak_mem_mb - first_value(peak_mem_mb) OVER w AS extra_mem_vs_smallest_batch_mb
FROM latest_measurements
WINDOW w AS (PARTITION BY model_hash, phase, device_name, device, mode, precision ORDER BY batch_size)
ORDER BY model, phase, device_name, mode, precision, batch_size
