package ui

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/notify"
)

// DigestPreviewer is what GET /api/v1/appliance/digest/preview reads of
// the notify part; *notify.Notifier implements it. Options.Notify is used
// when it implements this too.
type DigestPreviewer interface {
	DigestPreview() (notify.DigestPreview, error)
}

// digestAlert is one alert of the previewed digest.
type digestAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
}

// digestPreviewData is the endpoint's data: when the next digest goes out,
// to whom, and what it would say if sent now (title and text empty, alerts
// [] when it holds nothing and so would not be sent).
type digestPreviewData struct {
	At        *time.Time    `json:"at"`
	AsOf      time.Time     `json:"asOf"`
	Receivers []string      `json:"receivers"`
	Title     string        `json:"title"`
	Text      string        `json:"text"`
	Alerts    []digestAlert `json:"alerts"`
}

// digestPreview serves GET /api/v1/appliance/digest/preview: the next
// daily digest of P2 alerts, read-only.
func (s *Server) digestPreview(c echo.Context) error {
	dp, ok := s.opts.Notify.(DigestPreviewer)
	if !ok {
		return apiError(c, http.StatusNotFound, "not_found", "alerting is not enabled: there is no digest")
	}
	p, err := dp.DigestPreview()
	if err != nil {
		return apiError(c, http.StatusInternalServerError, "internal", "digest preview: "+err.Error())
	}
	d := digestPreviewData{AsOf: p.AsOf, Receivers: p.Receivers, Alerts: []digestAlert{}}
	if d.Receivers == nil {
		d.Receivers = []string{}
	}
	if !p.At.IsZero() {
		d.At = &p.At
	}
	if m := p.Message; m != nil {
		d.Title, d.Text = m.Title, m.Text
		for _, a := range m.Alerts {
			d.Alerts = append(d.Alerts, digestAlert{Status: a.Status, Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, EndsAt: a.EndsAt})
		}
	}
	return apiSuccess(c, d)
}
