package ui

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/ui/web"
)

// mountSPA serves the dashboard's pages and assets (behind the same auth
// as the API, since the routes share echo's middleware) and sends the
// rule and alert links Prometheus' rules manager writes
// (/graph?g0.expr=...&g0.tab=1) to /explore.
func (s *Server) mountSPA(e *echo.Echo) {
	h := echo.WrapHandler(web.Handler())
	page := h
	if web.Built() {
		page = bootPage(e, h)
	}
	for _, p := range web.Pages {
		e.GET(p, page)
	}
	e.GET("/assets/*", h)
	e.GET("/graph", func(c echo.Context) error {
		return c.Redirect(http.StatusFound, graphToExplore(c.QueryParams()))
	})
}

// graphToExplore turns Prometheus' /graph link parameters into the
// /explore URL with the same expression (and table view for g0.tab=1).
func graphToExplore(q url.Values) string {
	out := url.Values{}
	if expr := q.Get("g0.expr"); expr != "" {
		out.Set("expr", expr)
	}
	if q.Get("g0.tab") == "1" {
		out.Set("tab", "table")
	}
	if r := q.Get("g0.range_input"); r != "" {
		out.Set("from", "now-"+r)
		out.Set("to", "now")
	}
	if len(out) == 0 {
		return "/explore"
	}
	return "/explore?" + out.Encode()
}
