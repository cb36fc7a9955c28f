// Package grafana holds edgelink's Grafana dashboard (edgelink.json) and
// what its test needs to check it: every query names only metrics the
// control and edge binaries export.
package grafana

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

//go:embed edgelink.json
var dashboardJSON []byte

// Dashboard returns the dashboard's JSON model.
func Dashboard() []byte { return append([]byte(nil), dashboardJSON...) }

// Query is one panel target's PromQL expression.
type Query struct {
	Panel string
	Expr  string
}

// Queries lists the expressions of every panel target, rows' nested panels
// included.
func Queries(dashboard []byte) ([]Query, error) {
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []Query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Panel: p.Title, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

// keywords are PromQL words that are not metric names when they stand
// alone: aggregation operators (which may be followed by by/without before
// their parenthesis), set and vector-matching operators, modifiers and
// literals.
var keywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "atan2": true, "offset": true,
	"inf": true, "nan": true,
}

// labelLists are the words followed by a parenthesised list of label names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// MetricNames returns the metric names an expression selects, in order of
// appearance, each once. It is a tokenizer, not a parser: it skips strings,
// label matchers ({…}), range and subquery brackets ([…]), numbers and
// durations, Grafana variables ($…), function names (a word followed by
// "("), keywords, and the label lists of by/without/on/ignoring/group_*.
func MetricNames(expr string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	rs := []rune(expr)
	i := 0
	skipSpace := func(j int) int {
		for j < len(rs) && unicode.IsSpace(rs[j]) {
			j++
		}
		return j
	}
	for i < len(rs) {
		c := rs[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(rs, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '#': // comment to the end of the line
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case c == '{' || c == '[':
			j, err := skipGroup(rs, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$': // Grafana variable: $name, ${name}, $__name
			i++
			if i < len(rs) && rs[i] == '{' {
				j, err := skipGroup(rs, i)
				if err != nil {
					return nil, err
				}
				i = j
				continue
			}
			for i < len(rs) && isWord(rs[i]) {
				i++
			}
		case unicode.IsDigit(c) || (c == '.' && i+1 < len(rs) && unicode.IsDigit(rs[i+1])):
			// Numbers (1, 0.99, 1e3, 0x1f) and durations (5m, 1h30m).
			for i < len(rs) && (isWord(rs[i]) || rs[i] == '.' ||
				((rs[i] == '+' || rs[i] == '-') && (rs[i-1] == 'e' || rs[i-1] == 'E'))) {
				i++
			}
		case isWordStart(c):
			j := i
			for j < len(rs) && isWord(rs[j]) {
				j++
			}
			word := string(rs[i:j])
			next := skipSpace(j)
			switch {
			case labelLists[word]:
				// by (a, b): the list names labels, not metrics.
				if next < len(rs) && rs[next] == '(' {
					k, err := skipGroup(rs, next)
					if err != nil {
						return nil, err
					}
					j = k
				}
			case keywords[strings.ToLower(word)]:
			case next < len(rs) && rs[next] == '(':
				// A function call.
			default:
				if !seen[word] {
					seen[word] = true
					names = append(names, word)
				}
			}
			i = j
		default:
			i++ // operators, parentheses, commas
		}
	}
	return names, nil
}

func isWordStart(c rune) bool {
	return c == '_' || c == ':' || (c < unicode.MaxASCII && unicode.IsLetter(c))
}

func isWord(c rune) bool { return isWordStart(c) || (c < unicode.MaxASCII && unicode.IsDigit(c)) }

// skipString returns the index after the string literal starting at i.
func skipString(rs []rune, i int) (int, error) {
	q := rs[i]
	for j := i + 1; j < len(rs); j++ {
		if rs[j] == '\\' && q != '`' {
			j++
			continue
		}
		if rs[j] == q {
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d in %q", i, string(rs))
}

// skipGroup returns the index after the bracketed group starting at i,
// nested brackets and strings inside included.
func skipGroup(rs []rune, i int) (int, error) {
	var stack []rune
	closer := map[rune]rune{'(': ')', '[': ']', '{': '}'}
	for j := i; j < len(rs); j++ {
		switch c := rs[j]; c {
		case '"', '\'', '`':
			k, err := skipString(rs, j)
			if err != nil {
				return 0, err
			}
			j = k - 1
		case '(', '[', '{':
			stack = append(stack, closer[c])
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return 0, fmt.Errorf("unbalanced %q at %d in %q", c, j, string(rs))
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d in %q", rs[i], i, string(rs))
}
