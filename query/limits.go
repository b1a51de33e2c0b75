package query

import (
	"fmt"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// Bounds on the query text, checked before and right after parsing.
// Prometheus' parser and its formatter (format_query) cannot be stopped
// and their cost grows faster than the text: a 5,000-term sum takes over
// a second to parse, `Pretty` of a 500-term one most of a second, 40,000
// nested parentheses 15 s. Queries past these bounds are refused with 400
// before any of that work.
const (
	// DefaultMaxQueryLength is the longest query text (VictoriaMetrics'
	// default is 16 KiB; generated Grafana queries with long regexps
	// stay well under 128 KiB).
	DefaultMaxQueryLength = 128 << 10
	// DefaultMaxQueryDepth is the deepest expression tree: nested
	// parentheses, calls and binary operators (a chain `a+b+c` of n
	// terms is n deep). Parsing and formatting a tree this deep takes
	// well under a second.
	DefaultMaxQueryDepth = 256
)

// limitedParser is Prometheus' parser with the bounds above.
type limitedParser struct {
	parser.Parser
	maxLength, maxDepth int
}

// ParseExpr refuses queries past the bounds, then parses.
func (p limitedParser) ParseExpr(input string) (parser.Expr, error) {
	if err := checkQueryText(input, p.maxLength, p.maxDepth); err != nil {
		return nil, err
	}
	expr, err := p.Parser.ParseExpr(input)
	if err != nil {
		return expr, err
	}
	if d := exprDepth(expr, p.maxDepth+1); d > p.maxDepth {
		return nil, fmt.Errorf("query nests more than %d levels deep (binary operators, calls, parentheses); the appliance accepts at most %d", p.maxDepth, p.maxDepth)
	}
	return expr, nil
}

// checkQueryText checks the length, the nesting of brackets and the
// count of operators of a query without parsing it; the count bounds what
// the parser does with long chains (`a+b+…`), which nest without brackets.
func checkQueryText(s string, maxLength, maxDepth int) error {
	if len(s) > maxLength {
		return fmt.Errorf("query is %d bytes long; the appliance accepts at most %d", len(s), maxLength)
	}
	maxOps := 4 * maxDepth
	depth, ops := 0, 0
	var quote byte
	prevOp := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote != '`':
				i++
			case c == quote:
				quote = 0
			}
			continue
		}
		isOp := false
		switch c {
		case '"', '\'', '`':
			quote = c
		case '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case '(', '[', '{':
			depth++
			if depth > maxDepth {
				return fmt.Errorf("query nests brackets more than %d levels deep; the appliance accepts at most %d", maxDepth, maxDepth)
			}
		case ')', ']', '}':
			depth--
		case '+', '-', '*', '/', '%', '^', '=', '!', '<', '>':
			isOp = true
			if !prevOp {
				ops++
			}
		}
		prevOp = isOp
		if ops > maxOps {
			return fmt.Errorf("query has more than %d operators; the appliance accepts at most %d", maxOps, maxOps)
		}
	}
	return nil
}

// exprDepth is the depth of the expression tree, counted up to limit.
func exprDepth(e parser.Node, limit int) int {
	if e == nil || limit <= 0 {
		return 0
	}
	deepest := 0
	for _, c := range parser.Children(e) {
		deepest = max(deepest, exprDepth(c, limit-1))
		if deepest >= limit-1 {
			break
		}
	}
	return deepest + 1
}

// DefaultMaxSubquerySteps bounds the steps one subquery evaluates: its
// range (with the query's own range and those of the subqueries around
// it) over its step. Prometheus' engine repeats a step-invariant
// subquery's value (`vector(1)[300d:1s]`, 26 million steps) and keeps
// per-step statistics without looking at the query's context, so such a
// subquery went on for seconds after its client left; a million steps
// take well under 0.1 s there. VictoriaMetrics bounds the same at 100,000
// (-search.maxPointsSubqueryPerTimeseries); `max_over_time(x[30d:5s])`
// is 518,400 steps.
const DefaultMaxSubquerySteps = 1_000_000

// checkSubquerySteps refuses a query whose subqueries evaluate more than
// max steps over [start, end]; defaultStep is the step of subqueries
// written without one.
func checkSubquerySteps(expr parser.Expr, start, end time.Time, defaultStep time.Duration, max int) error {
	var err error
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		sq, ok := n.(*parser.SubqueryExpr)
		if !ok || err != nil {
			return nil
		}
		extent := end.Sub(start) + sq.Range
		for _, p := range path {
			if outer, ok := p.(*parser.SubqueryExpr); ok && outer != sq {
				extent += outer.Range
			}
		}
		step := sq.Step
		if step <= 0 {
			step = defaultStep
		}
		if step <= 0 {
			return nil
		}
		if steps := extent / step; steps > time.Duration(max) {
			err = fmt.Errorf("subquery %s evaluates %d steps; the appliance evaluates at most %d (a longer step or a shorter range)",
				truncateQuery(sq.String(), 120), steps, max)
		}
		return nil
	})
	return err
}

// truncateQuery shortens query text for an error message.
func truncateQuery(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
