package query

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

func TestQueryBounds(t *testing.T) {
	p := limitedParser{Parser: parser.NewParser(parser.Options{}), maxLength: DefaultMaxQueryLength, maxDepth: DefaultMaxQueryDepth}
	for name, q := range map[string]string{
		"50,000-term sum":      strings.Repeat("up+", 50_000) + "up",
		"1,100-term sum":       strings.Repeat("up+", 1_100) + "up",
		"300-term sum":         strings.Repeat("up+", 300) + "up",
		"20,000 parentheses":   strings.Repeat("(", 20_000) + "up" + strings.Repeat(")", 20_000),
		"300 nested abs calls": strings.Repeat("abs(", 300) + "up" + strings.Repeat(")", 300),
	} {
		_, err := p.ParseExpr(q)
		require.Error(t, err, name)
	}
	for name, q := range map[string]string{
		"200-term sum":        strings.Repeat("up+", 199) + "up",
		"brackets in strings": `up{job="` + strings.Repeat("(", 1000) + `"}`,
		"operators in regexp": `up{job=~"` + strings.Repeat("a|-+", 2000) + `"}`,
		"comment":             "up # " + strings.Repeat("(", 1000) + "\n",
		"matchers and offset": `sum by (job) (rate(http_requests_total{code!="200",job=~"a.*"}[5m] offset -1m)) / 2`,
	} {
		_, err := p.ParseExpr(q)
		require.NoError(t, err, name)
	}
}
