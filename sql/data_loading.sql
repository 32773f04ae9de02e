-- Data-loading bottleneck of training jobs (tracker campaign loader): per model, dataset
-- and loader setting (num_workers, prefetch_factor, batch_size), the latest job's share of
-- step time spent waiting for data, its throughput and step time, and which setting of
-- each model, dataset and device mode is the fastest (is_best): a job's CPU mode (threads, the
-- C allocator) changes its step time, so settings are compared within one mode. steps: every
-- step the job measured; its figures are of those after the first (the set-up) since tracker 0.7.4.
SELECT
    t.model, t.dataset, t.device, t.mode,
    CAST(t.num_workers AS BIGINT) AS num_workers,
    CAST(t.prefetch_factor AS BIGINT) AS prefetch_factor,
    CAST(t.batch_size AS BIGINT) AS batch_size,
    CAST(t.data_wait_frac AS DOUBLE) AS data_wait_fraction,
    CAST(t.throughput_per_s AS DOUBLE) AS images_per_s,
    CAST(t.step_time_ms AS DOUBLE) AS median_step_ms,
    CAST(t.data_wait_ms AS DOUBLE) AS median_data_wait_ms,
    CAST(t.peak_mem_mb AS DOUBLE) AS peak_mem_mb,
    CAST(t.samples_count + COALESCE(t.warmup_count, 0) AS BIGINT) AS steps,
    t.run_id,
    rank() OVER (PARTITION BY t.model, t.dataset, t.device, t.mode ORDER BY t.throughput_per_s DESC) = 1 AS is_best
FROM (
    SELECT *
    FROM training_runs
    WHERE status = 'FINISHED' AND data_wait_frac IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY config_key ORDER BY end_time DESC, run_id) = 1
) t
