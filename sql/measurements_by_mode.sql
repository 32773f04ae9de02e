-- Measurements by device mode: each latest measurement with the description of the mode
-- it ran in (CPU threads and governor, GPU clocks and power limit, Jetson nvpmodel) and its
-- latency relative to the fastest mode for the same network, batch, phase, device and number format.
SELECT
    m.model, m.model_hash, CAST(m.input_size AS BIGINT) AS input_size, m.phase, m.batch_size, m.precision, m.device_name, m.device, m.mode,
    d.cpu_threads, d.cpu_governor, d.gpu_sm_clock_mhz, d.gpu_mem_clock_mhz, d.gpu_power_limit_w, d.nvpmodel,
    m.latency_ms, m.throughput_per_s, m.peak_mem_mb, m.power_w, m.energy_per_iter_j, m.gpu_util_pct,
    m.latency_ms / min(m.latency_ms) OVER (PARTITION BY m.model_hash, m.phase, m.batch_size, m.precision, m.device_name, m.device) AS latency_vs_fastest_mode
FROM latest_measurements m
LEFT JOIN (
    SELECT * FROM mode_runs WHERE status = 'FINISHED'
    QUALIFY row_number() OVER (PARTITION BY mode, device ORDER BY end_time DESC) = 1
) d ON d.mode = m.mode AND d.device = m.device
