-- Every FINISHED whole-network measurement, inference (network runs) and training
-- (training runs) in one shape, with the device it ran on (whole_network_runs says how it is
-- named). FAILED runs never appear here.
SELECT * EXCLUDE (status)
FROM whole_network_runs
WHERE status = CAST('FINISHED' AS VARCHAR)
