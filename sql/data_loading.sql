-- Data-loading bottleneck of training jobs (tracker campaign loader): per model, dataset, input
-- size and loader setting (num_workers, prefetch_factor, batch_size), the latest job's share of
-- step time spent waiting for data, its throughput and step time, and which setting of each
-- model, dataset, input size and device mode is the fastest (is_best): a job's CPU mode (threads,
-- the C allocator) changes its step time, so settings are compared within one mode. steps: every
-- step the job measured; its figures are of those after the first (the set-up) since tracker
-- 0.7.4. Since 0.9.1 a setting is its loader settings, input size and mode (jobs apart in their
-- learning rate or max_steps alone were rows no column told apart), and a job of one step, its
-- set-up alone, is never is_best (a batch larger than the dataset was, on its set-up step).
-- A dataset is its folder (data_path, the resolved path) since 0.9.8: two folders of one name,
-- both dataset imagefolder:shapes, were one dataset, the older job's rows hidden by the newer's;
-- a job logged before then has no data_path and is grouped by its dataset alone.
-- speed_probe_ms: the speed probe's median beside the job's steps (tracker.profile.probe: a fixed
-- workload, the machine's speed when it measured, timed just before its first step and just after its
-- last; since tracker 0.9.11), in the unit of every measurement's; NULL before then and where it failed.
SELECT
    t.model, t.dataset, t.data_path, t.device, t.mode, CAST(t.input_size AS BIGINT) AS input_size,
    CAST(t.num_workers AS BIGINT) AS num_workers,
    CAST(t.prefetch_factor AS BIGINT) AS prefetch_factor,
    CAST(t.batch_size AS BIGINT) AS batch_size,
    CAST(t.data_wait_frac AS DOUBLE) AS data_wait_fraction,
    CAST(t.throughput_per_s AS DOUBLE) AS images_per_s,
    CAST(t.step_time_ms AS DOUBLE) AS median_step_ms,
    CAST(t.data_wait_ms AS DOUBLE) AS median_data_wait_ms,
    CAST(t.peak_mem_mb AS DOUBLE) AS peak_mem_mb,
    CAST(t.speed_probe_ms AS DOUBLE) AS speed_probe_ms,
    CAST(t.samples_count + COALESCE(t.warmup_count, 0) AS BIGINT) AS steps,
    t.run_id,
    COALESCE(t.warmup_count, 0) > 0 AND rank() OVER (
        PARTITION BY t.model, t.dataset, t.data_path, t.device, t.mode, t.input_size, COALESCE(t.warmup_count, 0) > 0
        ORDER BY t.throughput_per_s DESC) = 1 AS is_best
FROM (
    SELECT *
    FROM training_runs
    WHERE status = 'FINISHED' AND data_wait_frac IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY model, dataset, data_path, device, mode, input_size, num_workers, prefetch_factor,
                                            batch_size ORDER BY end_time DESC, run_id) = 1
) t
