-- Every FINISHED measurement of a configuration beside its latest run (run_id, the key
-- measurement_features gives the configuration's row), with the experiment it was logged in:
-- what a fingerprint's label is the median of. measurement_labels takes it over them all; a
-- fingerprint trained on named experiments (fingerprint train --from-experiment) over theirs alone,
-- both through the table macro measurement_labels_of.
-- speed_probe_ms: the machine's speed when it measured (tracker.profile.probe; NULL before 0.9.9),
-- speed_probe_version the version of that probe, its unit (NULL where none; since 0.9.11).
-- network_mem_current (since 0.9.27): whether its network_mem_mb counts what this tracker's does, the network's
-- own memory alone: measured by tracker 0.9.26 or later (0.9.27 in int8). Before, it also counted what the
-- network's first build left behind in the process (its unpruned base, for a pruned network), and an int8
-- network's float copy, which torch.ao's quantization held (tracker.profile.measure.build_once,
-- tracker.profile.network.quantized_int8). measurement_labels_of learns network_mem_mb from those alone.
-- The versions are tracker.profile.records.NETWORK_MEM_SINCE's, which a campaign measures again below; a
-- version that does not start with numbers (a tag set by hand, none) is not current.
SELECT
    l.run_id,
    m.run_id AS measurement_run_id,
    m.experiment,
    m.end_time,
    m.latency_ci_rel,
    m.samples_count,
    m.latency_ms,
    m.peak_mem_mb,
    m.network_mem_mb,
    m.tensor_peak_mb,
    m.power_w,
    m.energy_per_iter_j,
    m.gpu_util_pct,
    m.speed_probe_ms,
    m.speed_probe_version,
    COALESCE(CASE WHEN regexp_matches(m.tracker_version, '^[0-9]+([.][0-9]+)+')
                  THEN TRY_CAST(string_split(regexp_extract(m.tracker_version, '^[0-9]+([.][0-9]+)+'), '.') AS BIGINT[])
                       >= CASE WHEN m.precision = CAST('int8' AS VARCHAR) THEN CAST([0, 9, 27] AS BIGINT[])
                               ELSE CAST([0, 9, 26] AS BIGINT[]) END
             END,
             false) AS network_mem_current
FROM latest_measurements l
JOIN measurements m USING (config_key)
