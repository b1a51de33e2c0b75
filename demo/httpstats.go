package demo

// httpStats mirrors the families prometheus-fastapi-instrumentator adds to
// a vLLM server. Like prometheus_client, a labelled child appears on first
// use and children keep their order of creation, so the series count grows
// by a handful when, say, the first 404 is served.
type httpStats struct {
	requests []httpRequestsChild
	sizes    []httpSizeChild
	handlers []httpDurationChild
	highr    histogram
	highrAt  float64 // _created: the unlabelled histogram exists from start-up
}

type httpRequestsChild struct {
	handler, method, status string
	count, created          float64
}

type httpSizeChild struct {
	handler                   string
	reqCount, reqSum, respSum float64
	created                   float64
}

type httpDurationChild struct {
	handler, method string
	hist            histogram
	created         float64
}

func newHTTPStats(created float64) httpStats {
	return httpStats{highr: newHistogram(httpHighrBuckets), highrAt: created}
}

// record adds w requests to handler that took dur seconds. Handlers
// vLLM excludes from instrumentation (/metrics, /health, /version, ...)
// must not be recorded.
func (s *httpStats) record(now float64, handler, method, status string, reqSize, respSize, dur, w float64) {
	if w <= 0 {
		return
	}
	var rc *httpRequestsChild
	for i := range s.requests {
		c := &s.requests[i]
		if c.handler == handler && c.method == method && c.status == status {
			rc = c
			break
		}
	}
	if rc == nil {
		s.requests = append(s.requests, httpRequestsChild{handler: handler, method: method, status: status, created: now})
		rc = &s.requests[len(s.requests)-1]
	}
	rc.count += w

	var sc *httpSizeChild
	for i := range s.sizes {
		if s.sizes[i].handler == handler {
			sc = &s.sizes[i]
			break
		}
	}
	if sc == nil {
		s.sizes = append(s.sizes, httpSizeChild{handler: handler, created: now})
		sc = &s.sizes[len(s.sizes)-1]
	}
	sc.reqCount += w
	sc.reqSum += w * reqSize
	sc.respSum += w * respSize

	var dc *httpDurationChild
	for i := range s.handlers {
		if s.handlers[i].handler == handler && s.handlers[i].method == method {
			dc = &s.handlers[i]
			break
		}
	}
	if dc == nil {
		s.handlers = append(s.handlers, httpDurationChild{handler: handler, method: method, hist: newHistogram(httpHandlerBuckets), created: now})
		dc = &s.handlers[len(s.handlers)-1]
	}
	dc.hist.observe(dur, w)

	s.highr.observe(dur, w)
}

// series is the number of samples appendTo writes.
func (s *httpStats) series() int {
	n := 2 * len(s.requests) // _total and _created
	n += 6 * len(s.sizes)    // _count, _sum, _created for requests and responses
	n += len(s.handlers) * (len(httpHandlerBuckets.leText) + 3)
	return n + len(httpHighrBuckets.leText) + 3
}

const (
	helpHTTPRequests = "Total number of requests by method, status and handler."
	helpHTTPReqSize  = "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "
	helpHTTPRespSize = "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "
	helpHTTPHighr    = "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. "
	helpHTTPDuration = "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. "
)

func appendHeader(dst []byte, name, help, typ string) []byte {
	dst = append(dst, "# HELP "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, help...)
	dst = append(dst, "\n# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

func appendSample(dst []byte, name string, v float64, labels ...string) []byte {
	dst = append(dst, name...)
	if len(labels) > 0 {
		dst = append(dst, '{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, labels[i]...)
			dst = append(dst, '=', '"')
			dst = appendLabelValue(dst, labels[i+1])
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ' ')
	dst = appendPyFloat(dst, v)
	return append(dst, '\n')
}

// appendTo renders the families in the fixture's order, each followed by
// its _created gauge family as prometheus_client does.
func (s *httpStats) appendTo(dst []byte) []byte {
	dst = appendHeader(dst, "http_requests_total", helpHTTPRequests, "counter")
	for _, c := range s.requests {
		dst = appendSample(dst, "http_requests_total", c.count, "handler", c.handler, "method", c.method, "status", c.status)
	}
	dst = appendHeader(dst, "http_requests_created", helpHTTPRequests, "gauge")
	for _, c := range s.requests {
		dst = appendSample(dst, "http_requests_created", c.created, "handler", c.handler, "method", c.method, "status", c.status)
	}
	for _, f := range [...]struct {
		name, help string
		resp       bool
	}{{"http_request_size_bytes", helpHTTPReqSize, false}, {"http_response_size_bytes", helpHTTPRespSize, true}} {
		dst = appendHeader(dst, f.name, f.help, "summary")
		for _, c := range s.sizes {
			sum := c.reqSum
			if f.resp {
				sum = c.respSum
			}
			dst = appendSample(dst, f.name+"_count", c.reqCount, "handler", c.handler)
			dst = appendSample(dst, f.name+"_sum", sum, "handler", c.handler)
		}
		dst = appendHeader(dst, f.name+"_created", f.help, "gauge")
		for _, c := range s.sizes {
			dst = appendSample(dst, f.name+"_created", c.created, "handler", c.handler)
		}
	}
	// The unlabelled histogram exists from start-up in prometheus_client;
	// vllm-idle.prom shows it with zero counts.
	const highr = "http_request_duration_highr_seconds"
	dst = appendHeader(dst, highr, helpHTTPHighr, "histogram")
	for i, le := range s.highr.layout.leText {
		dst = appendSample(dst, highr+"_bucket", s.highr.cum[i], "le", le)
	}
	dst = appendSample(dst, highr+"_count", s.highr.count())
	dst = appendSample(dst, highr+"_sum", s.highr.sum)
	dst = appendHeader(dst, highr+"_created", helpHTTPHighr, "gauge")
	dst = appendSample(dst, highr+"_created", s.highrAt)

	const dur = "http_request_duration_seconds"
	dst = appendHeader(dst, dur, helpHTTPDuration, "histogram")
	for _, c := range s.handlers {
		for i, le := range c.hist.layout.leText {
			dst = appendSample(dst, dur+"_bucket", c.hist.cum[i], "handler", c.handler, "le", le, "method", c.method)
		}
		dst = appendSample(dst, dur+"_count", c.hist.count(), "handler", c.handler, "method", c.method)
		dst = appendSample(dst, dur+"_sum", c.hist.sum, "handler", c.handler, "method", c.method)
	}
	dst = appendHeader(dst, dur+"_created", helpHTTPDuration, "gauge")
	for _, c := range s.handlers {
		dst = appendSample(dst, dur+"_created", c.created, "handler", c.handler, "method", c.method)
	}
	return dst
}

func (s *httpStats) reset(created float64) {
	*s = newHTTPStats(created)
}
