-- Configurations measured more than once (a campaign's `repeats`, `tracker profile ... --again`,
-- or the same configuration in two experiments): how far the repeats' medians lie apart. A measurement's CI
-- covers its own sampling window; the spread between repeats taken at different times is the
-- machine's drift, which no single window can see. latest_measurements keeps the newest.
-- input_size and precision (the number format) tell apart repeats of one network at one batch size
-- that its key keeps apart (since tracker 0.8.9 shown here). probe_spread_rel: the same spread of each
-- repeat's latency over the speed probe timed beside it (tracker.profile.probe, since 0.9.9), where every
-- repeat has one, else NULL: what is left of the spread once the machine's own speed is taken out (since
-- 0.9.11 only where every repeat's probe is of one version, speed_probe_version: another version is another unit).
-- The memory a repeat read moves too (since 0.9.28): peak_mem_spread_rel, the same spread of peak_mem_mb, and
-- over the repeats whose network_mem_mb counts what this tracker counts (labelled_measurements'
-- network_mem_current) network_mem_repeats, the least, median and largest network_mem_mb and
-- network_mem_spread_rel (NULL with fewer than two such repeats). On this 2-core VM, three repeats of one
-- configuration in a campaign read network_mem_mb up to 41 % apart with glibc's default allocator and up to
-- 66 % with the allocator retaining (generated networks at batch 4; resnet18 and mobilenet_v2 at batch 1 and
-- 4 within 2.3 % retaining): a label is their median (measurement_labels_of); one repeat is not the figure.
WITH repeated AS (
    -- each measurement with its network_mem_mb where it counts what this tracker counts, else NULL
    SELECT m.*, CASE WHEN c.network_mem_current THEN m.network_mem_mb END AS current_network_mem_mb
    FROM measurements m
    LEFT JOIN (SELECT measurement_run_id AS run_id, network_mem_current FROM labelled_measurements) c USING (run_id)
    WHERE m.latency_ms IS NOT NULL
)
SELECT
    config_key,
    any_value(model) AS model,
    any_value(batch_size) AS batch_size,
    any_value(input_size) AS input_size,
    any_value(precision) AS precision,
    any_value(phase) AS phase,
    any_value(device_name) AS device_name,
    any_value(mode) AS mode,
    CAST(count(*) AS BIGINT) AS repeats,
    min(latency_ms) AS min_latency_ms,
    median(latency_ms) AS median_latency_ms,
    max(latency_ms) AS max_latency_ms,
    CAST(max(latency_ms) / min(latency_ms) - 1.0 AS DOUBLE) AS repeat_spread_rel,
    CAST(CASE WHEN count(speed_probe_ms) = count(*) AND count(speed_probe_version) = count(*)
                   AND min(speed_probe_version) = max(speed_probe_version)
              THEN max(latency_ms / speed_probe_ms) / min(latency_ms / speed_probe_ms) - 1.0 END AS DOUBLE)
        AS probe_spread_rel,
    max(latency_ci_rel) AS max_ci_rel,
    CAST(max(peak_mem_mb) / min(peak_mem_mb) - 1.0 AS DOUBLE) AS peak_mem_spread_rel,
    CAST(count(current_network_mem_mb) AS BIGINT) AS network_mem_repeats,
    min(current_network_mem_mb) AS min_network_mem_mb,
    median(current_network_mem_mb) AS median_network_mem_mb,
    max(current_network_mem_mb) AS max_network_mem_mb,
    CAST(CASE WHEN count(current_network_mem_mb) > 1 AND min(current_network_mem_mb) > CAST(0 AS DOUBLE)
              THEN max(current_network_mem_mb) / min(current_network_mem_mb) - 1.0 END AS DOUBLE)
        AS network_mem_spread_rel,
    min(end_time) AS first_end_time,
    max(end_time) AS last_end_time
FROM repeated
GROUP BY config_key
HAVING count(*) > 1
ORDER BY repeat_spread_rel DESC
