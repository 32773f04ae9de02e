-- The latest FINISHED measurement of each configuration (same tracker.config_key: model,
-- description, batch size, phase, device, mode, precision, software): re-measurements
-- replace older ones, so every other view counts a configuration once.
SELECT *
FROM measurements
QUALIFY row_number() OVER (PARTITION BY config_key ORDER BY end_time DESC, run_id) = 1
