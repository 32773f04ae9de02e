-- Search-space candidates (tracker searchspace run): per search space and candidate, the latest
-- validation accuracy next to the latest latency of each source (measured by the profilers or
-- predicted by the fingerprints), device and batch size, and whether the candidate is on that
-- source's accuracy-latency Pareto frontier: no other candidate of the space is at least as
-- accurate and at least as fast, and better in one of the two. outside_trained_range (JSON) lists
-- a predicted latency's features beyond what its fingerprint learnt from; NULL when inside.
-- imprecise: a measured latency whose 95 % CI is wider than 25 % of it (tracker.profile.stats'
-- IMPRECISE_CI_REL, which fingerprint train leaves out too): such a candidate is never on the
-- frontier and keeps no other off it. mode: the device mode measured in; fingerprint_mode: the
-- mode the predicting version learnt from; cpu_util_others_pct: the CPU other processes took
-- while it was measured (since 0.9.0).
-- A candidate is its network (model_hash): an accuracy and a latency are joined only where they are of
-- the same network, one row per version of a candidate (an edited space's candidates lie beside the
-- old ones). current: the version of the candidate's newest accuracy run; the frontier is drawn among
-- current rows (stale versions are off it, and keep no other off it). `tracker searchspace report
-- FILE` places the file's own candidates among themselves (since 0.9.7; before, the view joined by
-- name, a width-24 latency beside a width-16 accuracy).
-- A figure is of its run's key: an accuracy of one [accuracy] budget (dataset, epochs, batch size,
-- learning rate, seed: accuracy_batch_size, learning_rate and seed beside epochs and dataset) and a
-- measured latency of one device mode are each their own row (since 0.9.9; before, the newest of any
-- budget and mode stood for every one, so a file's report showed another file's 2 epochs on 2
-- threads, and a re-run of its own did not bring them back): current where it is the budget and
-- version of the candidate's newest accuracy run and the mode of its newest latency, the frontier
-- drawn among rows of one budget and mode. `report FILE` places the rows of the file's own budget
-- and mode.
WITH acc_all AS (
    SELECT search_space, model, CAST(model_hash AS VARCHAR) AS model_hash, candidate,
           CAST(val_accuracy AS DOUBLE) AS accuracy, epochs, dataset, CAST(batch_size AS BIGINT) AS accuracy_batch_size,
           CAST(learning_rate AS DOUBLE) AS learning_rate, CAST(seed AS BIGINT) AS seed,
           run_id AS accuracy_run_id, end_time,
           row_number() OVER (PARTITION BY search_space, model ORDER BY end_time DESC, run_id) = 1 AS current
    FROM accuracy_runs
    WHERE status = 'FINISHED' AND search_space IS NOT NULL
),
acc AS (
    SELECT *
    FROM acc_all
    QUALIFY row_number() OVER (PARTITION BY search_space, model, model_hash, dataset, epochs, accuracy_batch_size,
                                            learning_rate, seed ORDER BY end_time DESC, accuracy_run_id) = 1
),
lat AS (
    SELECT search_space, model, CAST(model_hash AS VARCHAR) AS model_hash, latency_source, device,
           CAST(batch_size AS BIGINT) AS batch_size,
           CAST(latency_ms AS DOUBLE) AS latency_ms, CAST(device_time_s AS DOUBLE) AS device_time_s,
           CAST(outside_trained_range AS VARCHAR) AS outside_trained_range, run_id AS latency_run_id,
           CAST(latency_ci_rel AS DOUBLE) AS latency_ci_rel, CAST(mode AS VARCHAR) AS mode,
           CAST(fingerprint_mode AS VARCHAR) AS fingerprint_mode,
           CAST(cpu_util_others_pct AS DOUBLE) AS cpu_util_others_pct,
           COALESCE(CAST(latency_ci_rel AS DOUBLE) > 0.25, false) AS imprecise,
           row_number() OVER (PARTITION BY search_space, model, model_hash, latency_source, device, batch_size
                              ORDER BY end_time DESC, run_id) = 1 AS lat_current
    FROM candidate_runs
    WHERE status = 'FINISHED'
    QUALIFY row_number() OVER (PARTITION BY search_space, model, model_hash, latency_source, device, batch_size,
                                            CAST(mode AS VARCHAR) ORDER BY end_time DESC, run_id) = 1
),
joined AS (
    SELECT a.search_space, a.model, a.model_hash, a.current AND l.lat_current AS current, a.candidate, a.accuracy,
           a.epochs, a.dataset,
           l.latency_source, l.device, l.batch_size, l.latency_ms, l.device_time_s, l.outside_trained_range,
           a.accuracy_run_id, l.latency_run_id, l.latency_ci_rel, l.mode, l.fingerprint_mode, l.cpu_util_others_pct,
           l.imprecise, a.accuracy_batch_size, a.learning_rate, a.seed
    FROM acc a
    JOIN lat l USING (search_space, model, model_hash)
)
SELECT
    j.*,
    j.current AND NOT j.imprecise AND NOT EXISTS (
        SELECT 1
        FROM joined o
        WHERE o.search_space = j.search_space AND o.latency_source = j.latency_source
          AND o.device = j.device AND o.batch_size = j.batch_size AND o.current AND NOT o.imprecise
          AND o.dataset = j.dataset AND o.epochs = j.epochs AND o.accuracy_batch_size IS NOT DISTINCT FROM j.accuracy_batch_size
          AND o.learning_rate IS NOT DISTINCT FROM j.learning_rate AND o.seed IS NOT DISTINCT FROM j.seed
          AND o.mode IS NOT DISTINCT FROM j.mode
          AND o.accuracy >= j.accuracy AND o.latency_ms <= j.latency_ms
          AND (o.accuracy > j.accuracy OR o.latency_ms < j.latency_ms)
    ) AS on_frontier
FROM joined j
ORDER BY j.search_space, j.latency_source, j.device, j.batch_size, j.latency_ms
