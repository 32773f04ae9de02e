-- The same network (same description hash), batch size, phase and number format across devices: latency,
-- throughput, memory, power, energy and GPU utilisation on each device (NULL where a device
-- does not report one), and latency relative to the fastest one.
-- Only configurations measured on at least two devices appear.
SELECT
    model, model_hash, CAST(input_size AS BIGINT) AS input_size, phase, batch_size, precision, device_name, device, mode,
    latency_ms, throughput_per_s, peak_mem_mb, power_w, energy_per_iter_j, gpu_util_pct,
    latency_ms / min(latency_ms) OVER g AS latency_vs_fastest,
    count(DISTINCT device_name) OVER g AS devices
FROM latest_measurements
WINDOW g AS (PARTITION BY model_hash, phase, batch_size, precision)
QUALIFY count(DISTINCT device_name) OVER g >= 2
ORDER BY model, input_size, phase, batch_size, precision, latency_ms
