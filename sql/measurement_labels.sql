-- What a fingerprint learns to predict, per configuration: the median of every FINISHED
-- measurement of it (campaign repeats = R, profile --again), keyed by its latest run, as
-- measurement_features is. One measurement on a noisy machine is one draw: repeats minutes
-- apart differ by more than each one's CI (see measurement_repeats), and their median is the
-- steadier label. Read only when training; predictions never touch it.
-- latency_probe_ratio: the median of each measurement's latency over the speed probe timed beside it
-- (tracker.profile.probe), the latency in the machine's units, which its speed moving between repeats
-- moves less; speed_probe_ms the probe's median, probed_repeats how many repeats had one (since 0.9.9).
SELECT
    run_id,
    CAST(count(*) AS BIGINT) AS repeats,
    median(latency_ms) AS latency_ms,
    median(peak_mem_mb) AS peak_mem_mb,
    median(network_mem_mb) AS network_mem_mb,
    median(power_w) AS power_w,
    median(energy_per_iter_j) AS energy_per_iter_j,
    median(gpu_util_pct) AS gpu_util_pct,
    median(latency_ms / speed_probe_ms) AS latency_probe_ratio,
    median(speed_probe_ms) AS speed_probe_ms,
    CAST(count(speed_probe_ms) AS BIGINT) AS probed_repeats
FROM labelled_measurements
GROUP BY run_id
