package demo

// modelState is the metric state of one served model (one model_name).
type modelState struct {
	name  string
	prof  modelProfile
	key   uint64  // seed for this model's spikes
	phase float64 // of the load drift

	running, waiting, kvUsage float64
	prefixQueries, prefixHits float64
	preemptions               float64
	promptTokens, genTokens   float64
	success                   [len(finishReasons)]float64

	promptHist, genHist, iteration, maxGenHist histogram
	paramsN, paramsMaxTokens                   histogram
	ttft, tpot, itl                            histogram
	e2e, queue, inference, prefill, decode     histogram

	inflight int // requests being served over HTTP right now
}

func newModelState(name string) modelState {
	return modelState{
		name:            name,
		prof:            profileFor(name),
		promptHist:      newHistogram(tokenBuckets),
		genHist:         newHistogram(tokenBuckets),
		iteration:       newHistogram(iterationBuckets),
		maxGenHist:      newHistogram(tokenBuckets),
		paramsN:         newHistogram(paramsNBuckets),
		paramsMaxTokens: newHistogram(tokenBuckets),
		ttft:            newHistogram(ttftBuckets),
		tpot:            newHistogram(itlBuckets),
		itl:             newHistogram(itlBuckets),
		e2e:             newHistogram(requestTimeBuckets),
		queue:           newHistogram(requestTimeBuckets),
		inference:       newHistogram(requestTimeBuckets),
		prefill:         newHistogram(requestTimeBuckets),
		decode:          newHistogram(requestTimeBuckets),
	}
}

func (ms *modelState) histograms() []*histogram {
	return []*histogram{&ms.promptHist, &ms.genHist, &ms.iteration, &ms.maxGenHist, &ms.paramsN,
		&ms.paramsMaxTokens, &ms.ttft, &ms.tpot, &ms.itl, &ms.e2e, &ms.queue, &ms.inference,
		&ms.prefill, &ms.decode}
}

// reset zeroes what a process restart zeroes. Values are cleared in place:
// the compiled page points at them.
func (ms *modelState) reset() {
	ms.running, ms.waiting, ms.kvUsage = 0, 0, 0
	ms.prefixQueries, ms.prefixHits, ms.preemptions = 0, 0, 0
	ms.promptTokens, ms.genTokens = 0, 0
	clear(ms.success[:])
	for _, h := range ms.histograms() {
		h.reset()
	}
}

// processState holds the prometheus_client default collectors' values.
type processState struct {
	gcCollected, gcUncollectable, gcCollections [3]float64

	vmem, rss, rssBase, start, cpu, cpuAcc, openFds, maxFds float64
}

// HELP texts, verbatim from vLLM 0.11 (fixture vllm.prom).
const (
	helpPrefixQueries = "Prefix cache queries, in terms of number of queried tokens."
	helpPrefixHits    = "Prefix cache hits, in terms of number of cached tokens."
	helpPreemptions   = "Cumulative number of preemption from the engine."
	helpPromptTokens  = "Number of prefill tokens processed."
	helpGenTokens     = "Number of generation tokens processed."
	helpSuccess       = "Count of successfully processed requests."

	cacheConfigInfo = `vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_kvcache_space_bytes="None",cpu_offload_gb="0.0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.45",is_attention_free="False",kv_cache_memory_bytes="None",kv_sharing_fast_prefill="False",mamba_cache_dtype="auto",mamba_page_size_padded="None",mamba_ssm_cache_dtype="auto",num_cpu_blocks="None",num_gpu_blocks="14022",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="0.0",swap_space_bytes="0.0"} 1.0` + "\n"
)

// compilePage lays out everything before the http_* families, in the
// order of the fixture: python_*, process_*, then each vLLM family with the
// children of every model, each counter and histogram followed by its
// _created gauge family. With several models the page holds one child per
// model in every family, as vLLM's data-parallel ranks do with engine.
//
// _created families are kept, as in the fixture (vLLM's single API server
// runs prometheus_client without PROMETHEUS_DISABLE_CREATED_SERIES).
func (in *Instance) compilePage() {
	b := &pageBuilder{}
	p := &in.proc
	gens := [3]string{`generation="0"`, `generation="1"`, `generation="2"`}
	for _, f := range []struct {
		name, help string
		v          *[3]float64
	}{
		{"python_gc_objects_collected_total", "Objects collected during gc", &p.gcCollected},
		{"python_gc_objects_uncollectable_total", "Uncollectable objects found during GC", &p.gcUncollectable},
		{"python_gc_collections_total", "Number of times this generation was collected", &p.gcCollections},
	} {
		b.header(f.name, f.help, "counter")
		for g := range gens {
			b.sample(f.name, gens[g], &f.v[g])
		}
	}
	b.header("python_info", "Python platform information", "gauge")
	b.sample("python_info", `implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"`, &one)
	for _, f := range []struct {
		name, help, typ string
		v               *float64
	}{
		{"process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", &p.vmem},
		{"process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", &p.rss},
		{"process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge", &p.start},
		{"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter", &p.cpu},
		{"process_open_fds", "Number of open file descriptors.", "gauge", &p.openFds},
		{"process_max_fds", "Maximum number of open file descriptors.", "gauge", &p.maxFds},
	} {
		b.header(f.name, f.help, f.typ)
		b.sample(f.name, "", f.v)
	}

	ls := make([]string, len(in.models)) // `model_name="m"`
	for i := range in.models {
		ls[i] = `model_name="` + string(appendLabelValue(nil, in.models[i].name)) + `"`
	}
	const engine = `engine="0"`
	perModel := func(name, help, typ string, v func(ms *modelState) *float64) {
		b.header(name, help, typ)
		for i := range in.models {
			b.sample(name, engine+","+ls[i], v(&in.models[i]))
		}
	}
	created := func(base, help string) {
		perModel(base+"_created", help, "gauge", func(*modelState) *float64 { return &in.created })
	}
	perModel("vllm:num_requests_running", "Number of requests in model execution batches.", "gauge",
		func(ms *modelState) *float64 { return &ms.running })
	perModel("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge",
		func(ms *modelState) *float64 { return &ms.waiting })
	perModel("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge",
		func(ms *modelState) *float64 { return &ms.kvUsage })
	for _, c := range []struct {
		base, help string
		v          func(ms *modelState) *float64
	}{
		{"vllm:prefix_cache_queries", helpPrefixQueries, func(ms *modelState) *float64 { return &ms.prefixQueries }},
		{"vllm:prefix_cache_hits", helpPrefixHits, func(ms *modelState) *float64 { return &ms.prefixHits }},
		{"vllm:num_preemptions", helpPreemptions, func(ms *modelState) *float64 { return &ms.preemptions }},
		{"vllm:prompt_tokens", helpPromptTokens, func(ms *modelState) *float64 { return &ms.promptTokens }},
		{"vllm:generation_tokens", helpGenTokens, func(ms *modelState) *float64 { return &ms.genTokens }},
	} {
		perModel(c.base+"_total", c.help, "counter", c.v)
		created(c.base, c.help)
	}
	b.header("vllm:request_success_total", helpSuccess, "counter")
	for i := range in.models {
		for r, reason := range finishReasons {
			b.sample("vllm:request_success_total", engine+`,finished_reason="`+reason+`",`+ls[i], &in.models[i].success[r])
		}
	}
	b.header("vllm:request_success_created", helpSuccess, "gauge")
	for i := range in.models {
		for _, reason := range finishReasons {
			b.sample("vllm:request_success_created", engine+`,finished_reason="`+reason+`",`+ls[i], &in.created)
		}
	}
	for _, h := range []struct {
		name, help string
		h          func(ms *modelState) *histogram
	}{
		{"vllm:request_prompt_tokens", helpPromptTokens, func(ms *modelState) *histogram { return &ms.promptHist }},
		{"vllm:request_generation_tokens", helpGenTokens, func(ms *modelState) *histogram { return &ms.genHist }},
		{"vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", func(ms *modelState) *histogram { return &ms.iteration }},
		{"vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", func(ms *modelState) *histogram { return &ms.maxGenHist }},
		{"vllm:request_params_n", "Histogram of the n request parameter.", func(ms *modelState) *histogram { return &ms.paramsN }},
		{"vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", func(ms *modelState) *histogram { return &ms.paramsMaxTokens }},
		{"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", func(ms *modelState) *histogram { return &ms.ttft }},
		{"vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", func(ms *modelState) *histogram { return &ms.tpot }},
		{"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", func(ms *modelState) *histogram { return &ms.itl }},
		{"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", func(ms *modelState) *histogram { return &ms.e2e }},
		{"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", func(ms *modelState) *histogram { return &ms.queue }},
		{"vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", func(ms *modelState) *histogram { return &ms.inference }},
		{"vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", func(ms *modelState) *histogram { return &ms.prefill }},
		{"vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", func(ms *modelState) *histogram { return &ms.decode }},
	} {
		b.header(h.name, h.help, "histogram")
		for i := range in.models {
			b.histogram(h.name, engine, ls[i], h.h(&in.models[i]))
		}
		created(h.name, h.help)
	}
	b.header("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "gauge")
	b.static(cacheConfigInfo)
	b.series++
	in.segs = b.finish()
	in.staticSeries = b.series
}

// one is the value of info gauges.
var one = 1.0
