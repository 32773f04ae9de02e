-- The measurement whose layers stand for each configuration (same tracker.config_key): its latest
-- FINISHED measurement that ran its layers (has FINISHED layer runs under it), beside config_run_id,
-- the configuration's latest measurement (its row in latest_measurements and measurement_features).
-- The two differ where the configuration was measured again whole only, later (profile network in
-- another experiment, a campaign's repeat without layers): since tracker 0.9.11 its
-- layers stay with the measurement that ran them, where they dropped out of layer_features and
-- layer_labels (keyed by the latest measurement) until then. layer_features and layer_labels_of read it.
SELECT m.*, lm.run_id AS config_run_id
FROM measurements m
JOIN latest_measurements lm ON lm.config_key = m.config_key
WHERE EXISTS (SELECT 1 FROM layer_runs l
              WHERE l.parent_run_id = m.run_id AND l.status = CAST('FINISHED' AS VARCHAR))
QUALIFY row_number() OVER (PARTITION BY m.config_key ORDER BY m.end_time DESC, m.run_id) = 1
