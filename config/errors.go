package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
)

// Error is one problem in a configuration or rule file, at a line of it.
// Every error Load, LoadFile, ScrapeConfigsResolved and Check report is an
// *Error (several are joined with errors.Join).
type Error struct {
	File string // the file as it was named to Load or found by a glob; "-" when Load had no name
	Line int    // 1-based; 0 only when the line is truly unknown
	Msg  string
}

// Error formats the error as "file:line: message", the form editors and CI
// annotators jump to.
func (e *Error) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// joinErrors returns nil, the only error, or all of them joined, sorted by
// file and line so that the output reads top to bottom.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	sortErrors(errs)
	return errors.Join(errs...)
}

func sortErrors(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int {
		var ea, eb *Error
		if !errors.As(a, &ea) || !errors.As(b, &eb) {
			return 0
		}
		return cmp.Or(cmp.Compare(ea.File, eb.File), cmp.Compare(ea.Line, eb.Line))
	})
}

// JoinErrors returns nil, the only error, or all of them joined (joined
// errors among them flattened), sorted by file and line: the form Load
// reports, for the command to add the errors of the stages' checks.
func JoinErrors(errs ...error) error {
	var flat []error
	for _, err := range errs {
		flat = append(flat, flattenErrors(err)...)
	}
	return joinErrors(flat)
}

// SortErrors sorts *Errors by file and line, as Check returns them.
func SortErrors(errs []error) { sortErrors(errs) }

// flattenErrors undoes joinErrors.
func flattenErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// lineMsg is one message of a YAML library error; line is 0 if the message
// carries none.
type lineMsg struct {
	line int
	msg  string
}

var (
	yamlLineRE     = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)
	fieldUnknownRE = regexp.MustCompile(`(?s)^field (\S+) not found in type .*$`)
)

// splitYAMLError splits an error of yaml v2 or v3 into its messages and the
// line each names. Unmarshal errors of both libraries collect one "line N:
// ..." string per problem; syntax errors are one "yaml: line N: ..." string.
func splitYAMLError(err error) []lineMsg {
	var msgs []string
	var te2 *yaml2.TypeError
	var te3 *yaml3.TypeError
	switch {
	case errors.As(err, &te2):
		msgs = te2.Errors
	case errors.As(err, &te3):
		msgs = te3.Errors
	default:
		msgs = []string{err.Error()}
	}
	out := make([]lineMsg, 0, len(msgs))
	for _, m := range msgs {
		var lm lineMsg
		m = strings.TrimPrefix(m, "yaml: ")
		if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
			lm.line, _ = strconv.Atoi(sm[1])
			m = sm[2]
		}
		// yaml's "field foo not found in type config.plain" names a Go
		// type the operator never sees.
		if sm := fieldUnknownRE.FindStringSubmatch(m); sm != nil {
			m = fmt.Sprintf("unknown field %q", sm[1])
		}
		lm.msg = m
		out = append(out, lm)
	}
	return out
}

// fieldError is a validation error of one of this package's YAML types that
// names the keys, relative to the type's own mapping, of the value at fault,
// so that the loader can point at the line of that key.
type fieldError struct {
	keys []string
	err  error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErrorf(keys []string, format string, args ...any) error {
	return &fieldError{keys: keys, err: fmt.Errorf(format, args...)}
}
