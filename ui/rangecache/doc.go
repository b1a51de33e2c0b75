// Package rangecache answers Prometheus' /api/v1/query_range from the
// step-aligned points of earlier answers, as VictoriaMetrics' rollup
// result cache, Thanos' query frontend and Grafana do: the steps of a
// range query are independent of each other, so a point of the past,
// once computed, is the same on the next request over the same grid.
//
// The cache is an http.Handler middleware in front of the API's
// query_range. A request's grid (start + k*step) is looked up by its
// parameters (query, step, max_source_resolution, lookback_delta, the
// phase start mod step); the longest run of its points the cache holds
// and may serve is taken from the cache, and only the points before and
// after that run are evaluated, by the API itself, as range queries of
// their own, and joined per series. Only points older than a cut-off are
// kept: min(now - Freshness, the 1m and 5m tiers' watermarks).
//
// A cached point is served only when it is exactly what the query would
// compute now:
//
//   - the query is rewritten for the tiers the same way for the whole
//     range and for each evaluated part (storage.DB.AdaptForTiers gives
//     the same text and lookback), else the request is evaluated whole;
//   - no sample was committed into the point's window (its range
//     selectors, offsets and lookback, widened by the 5m resolution)
//     since: storage reports every commit at or before the 1m tier's
//     watermark (OnLateCommit) and the cut-off keeps cached points before
//     it; a late commit drops the entries over its window, whose points
//     are then neither kept nor served until the downsampler has rolled
//     it up again (Options.Passes: two finished passes after the report,
//     three for the order of the hooks; without Passes, never), and a
//     request during which a late commit came keeps nothing;
//   - no tier's coverage (retention start, watermark) moved across the
//     point's window, unless the whole window lies inside the covered
//     part, then and now, of the tier the query's step prefers
//     (storage.TierForStep) and of every coarser one (storage may read a
//     coarser tier where its rollups give the same answer);
//   - queries whose value depends on the range itself or on future
//     samples (@, negative offsets) and subqueries are not cached, nor
//     requests with parameters the cache does not know (stats, limit).
//
// A request with nocache=1 (VictoriaMetrics' parameter of the same
// meaning) is evaluated whole and its answer not kept: benchmarks and
// users who time the engine ask with it.
//
// Reset drops everything (the appliance calls it on every reload). Memory is
// bounded by Options.MaxBytes, least recently used entries going first.
package rangecache
