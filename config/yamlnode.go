package config

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
)

// Line numbers come from one parse of the file with yaml v3 into a node
// tree. Values are decoded with yaml v2, the library Prometheus' config types
// are written for (their UnmarshalYAML methods, inline HTTP client config and
// service discovery registry rely on its behaviour), one subtree at a time:
// the subtree is re-encoded, decoded strictly, and every error is mapped back
// to a line of the original file. yaml v2 reports "line N" only for its own
// type errors, and only relative to the re-encoded subtree; errors returned by
// UnmarshalYAML and Validate methods carry no line at all, so locate finds the
// node they talk about.

// parseDocument parses data into a node tree and returns its root value, or
// nil for an empty document.
func parseDocument(data []byte) (*yaml3.Node, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var doc yaml3.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err)
	}
	var next yaml3.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Line: next.Line, Msg: "a second YAML document (---) is not supported; keep one document per file"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// parserProblems are the messages of libyaml's parser, as opposed to its
// scanner. yaml v3 reports their line 0-based (it adds one only for scanner
// errors), so syntaxError adds the missing one.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %YAML directive",
	"found duplicate %TAG directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError turns a yaml v3 syntax error into an *Error with the right
// line.
func syntaxError(err error) error {
	msgs := splitYAMLError(err)
	if len(msgs) != 1 {
		return err
	}
	m := msgs[0]
	if m.line > 0 && slices.Contains(parserProblems, m.msg) {
		m.line++
	}
	return &Error{Line: m.line, Msg: m.msg}
}

// deref follows an alias to the node it names.
func deref(n *yaml3.Node) *yaml3.Node {
	for n != nil && n.Kind == yaml3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml3.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == yaml3.ScalarNode && n.Tag == "!!null"
}

// expandAliases returns a deep copy of n with every alias replaced by a copy
// of its anchored node, so that a subtree re-encoded alone is complete.
func expandAliases(n *yaml3.Node) *yaml3.Node {
	n = deref(n)
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml3.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = expandAliases(child)
	}
	return &c
}

// mappingKey returns the key node named key of mapping n, and its value.
func mappingKey(n *yaml3.Node, key string) (k, v *yaml3.Node) {
	n = deref(n)
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], deref(n.Content[i+1])
		}
	}
	return nil, nil
}

// keyLine returns the line of the deepest key along keys below n, or n's own
// line if the first key is absent.
func keyLine(n *yaml3.Node, keys ...string) int {
	line := deref(n).Line
	for _, key := range keys {
		k, v := mappingKey(n, key)
		if k == nil {
			break
		}
		line, n = k.Line, v
	}
	return line
}

// decodeV2 decodes n strictly with yaml v2 into out and returns the problems
// found, each with the line of the original file it is about.
func decodeV2(n *yaml3.Node, out any) []lineMsg {
	c := expandAliases(n)
	b, err := yaml3.Marshal(c)
	if err != nil {
		return []lineMsg{{line: n.Line, msg: "cannot re-encode this section: " + err.Error()}}
	}
	err = yaml2.UnmarshalStrict(b, out)
	if err == nil {
		return nil
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return []lineMsg{{line: keyLine(n, fe.keys...), msg: fe.Error()}}
	}
	lines := lineMapping(c, b)
	msgs := splitYAMLError(err)
	for i := range msgs {
		if msgs[i].line > 0 {
			msgs[i].line = lines(msgs[i].line)
		} else {
			msgs[i].line = locate(n, msgs[i].msg)
		}
	}
	return msgs
}

// lineMapping maps lines of encoded, the re-encoding of orig, back to the
// lines of orig by walking both node trees side by side.
func lineMapping(orig *yaml3.Node, encoded []byte) func(int) int {
	m := map[int]int{}
	var walk func(a, b *yaml3.Node)
	walk = func(a, b *yaml3.Node) {
		if _, ok := m[b.Line]; !ok {
			m[b.Line] = a.Line
		}
		if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
			return
		}
		for i := range a.Content {
			walk(a.Content[i], b.Content[i])
		}
	}
	var doc yaml3.Node
	if yaml3.Unmarshal(encoded, &doc) == nil && len(doc.Content) > 0 {
		walk(orig, doc.Content[0])
	}
	return func(line int) int {
		for l := line; l > 0; l-- {
			if o, ok := m[l]; ok {
				return o
			}
		}
		return orig.Line
	}
}

// messageKeys names, for errors of Prometheus' validation that carry no
// value to search for, the keys they are about, most specific first.
var messageKeys = []struct {
	substr string
	keys   []string
}{
	{"scrape timeout greater than scrape interval", []string{"scrape_timeout", "scrape_interval"}},
	{"job_name is empty", []string{"job_name"}},
}

// locate returns the line within n that an error message without a line is
// most likely about: a key the message is known to be about, else the value
// the message quotes (the longest one it contains), else a key it names, else
// n itself. Prometheus' messages quote the offending value ("not a valid
// duration string: \"1x\"", "\"http://a\" is not a valid hostname"), which
// makes this reliable in practice.
func locate(n *yaml3.Node, msg string) int {
	n = deref(n)
	for _, mk := range messageKeys {
		if strings.Contains(msg, mk.substr) {
			for _, key := range mk.keys {
				if k, _ := mappingKey(n, key); k != nil {
					return k.Line
				}
			}
			return n.Line
		}
	}

	type scalar struct {
		node *yaml3.Node
		key  bool
	}
	var scalars []scalar
	var walk func(n *yaml3.Node, parentKey string)
	walk = func(n *yaml3.Node, parentKey string) {
		n = deref(n)
		switch n.Kind {
		case yaml3.ScalarNode:
			// Messages that name the job ("... for scrape config with
			// job name \"x\"") are not about the job name.
			if parentKey != "job_name" {
				scalars = append(scalars, scalar{node: n})
			}
		case yaml3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				scalars = append(scalars, scalar{node: n.Content[i], key: true})
				walk(n.Content[i+1], n.Content[i].Value)
			}
		default:
			for _, c := range n.Content {
				walk(c, parentKey)
			}
		}
	}
	walk(n, "")

	best, bestScore := 0, 0
	for _, s := range scalars {
		v := s.node.Value
		score := 0
		switch {
		case s.key && strings.Contains(msg, strconv.Quote(v)):
			score = 1_000_000 + len(v)
		case s.key:
			if len(v) >= 5 && containsWord(msg, v) {
				score = len(v)
			}
		case v != "" && (strings.Contains(msg, strconv.Quote(v)) || strings.Contains(msg, "`"+v+"`")):
			score = 3_000_000 + len(v)
		case len(v) >= 3 && strings.Contains(msg, v):
			score = 2_000_000 + len(v)
		}
		if score > bestScore {
			best, bestScore = s.node.Line, score
		}
	}
	if bestScore > 0 {
		return best
	}
	return n.Line
}

// containsWord reports whether s contains word with no letter, digit or
// underscore on either side.
func containsWord(s, word string) bool {
	isWordByte := func(b byte) bool {
		return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isWordByte(s[start-1])) && (end == len(s) || !isWordByte(s[end])) {
			return true
		}
		i = start + 1
	}
}
