-- What the layer-level fingerprint learns to predict, per layer run (a module's or the functions'
-- between modules; layer_features has the modules' alone, with their node features): the
-- median latency_ms of that layer (same index and name) over every FINISHED measurement of its
-- configuration that ran its layers (campaign repeats = R with layers, profile --again),
-- keyed by the layer run of the latest measurement, as measurement_labels is for whole
-- networks: the layer sums and the network labels they are calibrated on then come from the
-- same repeats. Read only when training; predictions never touch it. latency_probe_ratio: the median of
-- each repeat's latency over the speed probe that bracketed its layers (tracker.profile.probe; NULL where
-- none had one, before 0.9.9), probed_repeats how many had one, as measurement_labels has them.
SELECT
    cur.run_id,
    CAST(count(*) AS BIGINT) AS repeats,
    median(l.latency_ms) AS latency_ms,
    median(l.latency_ms / l.speed_probe_ms) AS latency_probe_ratio,
    CAST(count(l.speed_probe_ms) AS BIGINT) AS probed_repeats
FROM layer_runs cur
JOIN latest_measurements lm ON lm.run_id = cur.parent_run_id
JOIN measurements m ON m.config_key = lm.config_key
JOIN layer_runs l ON l.parent_run_id = m.run_id AND l.layer_index = cur.layer_index AND l.layer_name = cur.layer_name
WHERE cur.status = CAST('FINISHED' AS VARCHAR)
    AND l.status = CAST('FINISHED' AS VARCHAR)
    AND l.latency_ms IS NOT NULL
GROUP BY cur.run_id
