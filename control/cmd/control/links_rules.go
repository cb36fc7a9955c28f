package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/apiwire"
)

// ruleFlags are how links create and links set take a link's routing
// rules and password (docs/cli.md). A password is read from a file (or
// stdin), never a flag's value: flags show in ps and shell histories.
type ruleFlags struct {
	Rules        []string `name:"rule" sep:"none" placeholder:"'COND... => URL'" help:"A routing rule (repeat, in order: the first that matches wins): conditions device=ios,android,desktop country=US,CA language=en,de query=NAME or query=NAME=VALUE, all of which must hold, then => and the target. For anything this cannot say (a value with a space), --rules-file."`
	RulesFile    string   `name:"rules-file" placeholder:"FILE" help:"The rules as a JSON array, as the API takes them (docs/api.md); - reads stdin."`
	PasswordFile string   `name:"password-file" placeholder:"FILE" help:"Protect the link with the password in FILE (its first line; - reads stdin): edges ask for it before they redirect."`
}

// read returns the rules and the password the flags give (nil and "" for
// none).
func (f ruleFlags) read(cmd string) ([]apiwire.Rule, string, error) {
	if len(f.Rules) > 0 && f.RulesFile != "" {
		return nil, "", usageError{fmt.Errorf("%s: give --rule or --rules-file, not both", cmd)}
	}
	if f.RulesFile == "-" && f.PasswordFile == "-" {
		return nil, "", usageError{fmt.Errorf("%s: --rules-file and --password-file cannot both read stdin", cmd)}
	}
	var rules []apiwire.Rule
	for i, s := range f.Rules {
		r, err := parseRule(s)
		if err != nil {
			return nil, "", usageError{fmt.Errorf("%s: --rule %d: %w", cmd, i+1, err)}
		}
		rules = append(rules, r)
	}
	if f.RulesFile != "" {
		b, err := readInput(f.RulesFile)
		if err != nil {
			return nil, "", usageError{fmt.Errorf("%s: --rules-file: %w", cmd, err)}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rules); err != nil {
			return nil, "", usageError{fmt.Errorf("%s: --rules-file: not a JSON array of rules: %w", cmd, err)}
		}
		if rules == nil {
			rules = []apiwire.Rule{} // null: none
		}
	}
	var password string
	if f.PasswordFile != "" {
		b, err := readInput(f.PasswordFile)
		if err != nil {
			return nil, "", usageError{fmt.Errorf("%s: --password-file: %w", cmd, err)}
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if password = strings.TrimSuffix(line, "\r"); password == "" {
			return nil, "", usageError{fmt.Errorf("%s: --password-file: the first line is empty", cmd)}
		}
	}
	return rules, password, nil
}

// readInput reads a file, or stdin for "-", bounded: a rules file is at
// most what a create body may be.
func readInput(name string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err == nil && len(b) > 1<<20 {
		err = errors.New("larger than 1 MiB")
	}
	return b, err
}

// parseRule reads the compact form of a rule: conditions separated by
// spaces, "=>", the target.
func parseRule(s string) (apiwire.Rule, error) {
	conds, target, ok := strings.Cut(s, "=>")
	var r apiwire.Rule
	if r.URL = strings.TrimSpace(target); !ok || r.URL == "" {
		return r, errors.New("want CONDITIONS => URL, e.g. 'device=ios => https://apps.apple.com/app/id1'")
	}
	for _, c := range strings.Fields(conds) {
		key, value, ok := strings.Cut(c, "=")
		if !ok || value == "" {
			return r, fmt.Errorf("condition %q is not NAME=VALUE", c)
		}
		switch key {
		case "device":
			r.Device = append(r.Device, strings.Split(value, ",")...)
		case "country":
			r.Country = append(r.Country, strings.Split(value, ",")...)
		case "language":
			r.Language = append(r.Language, strings.Split(value, ",")...)
		case "query":
			q := apiwire.QueryCondition{Param: value}
			if name, v, hasValue := strings.Cut(value, "="); hasValue {
				q = apiwire.QueryCondition{Param: name, Equals: &v}
			}
			r.Query = append(r.Query, q)
		default:
			return r, fmt.Errorf("unknown condition %q: use device, country, language or query", key)
		}
	}
	if len(r.Device)+len(r.Country)+len(r.Language)+len(r.Query) == 0 {
		return r, errors.New("a rule needs at least one condition before =>")
	}
	return r, nil
}

// formatRule is a rule in the compact form parseRule reads (a value with
// a space stays as it is: shown, not parsed again).
func formatRule(r apiwire.Rule) string {
	var parts []string
	for _, c := range []struct {
		name string
		vals []string
	}{{"device", r.Device}, {"country", r.Country}, {"language", r.Language}} {
		if len(c.vals) > 0 {
			parts = append(parts, c.name+"="+strings.Join(c.vals, ","))
		}
	}
	for _, q := range r.Query {
		if q.Equals != nil {
			parts = append(parts, "query="+q.Param+"="+*q.Equals)
		} else {
			parts = append(parts, "query="+q.Param)
		}
	}
	return strings.Join(parts, " ") + " => " + r.URL
}

// extrasRows are the rows printLink shows for a link's rules, password and
// click limit.
func extrasRows(l *apiclient.Link) [][2]string {
	var rows [][2]string
	for i, r := range l.Rules {
		rows = append(rows, [2]string{fmt.Sprintf("rule %d", i+1), formatRule(r)})
	}
	if l.PasswordProtected {
		rows = append(rows, [2]string{"password", "yes (edges ask for it)"})
	}
	if l.MaxClicks != nil {
		rows = append(rows, [2]string{"max_clicks", strconv.FormatInt(*l.MaxClicks, 10)})
	}
	return rows
}

type linksSetCmd struct {
	Code string `arg:"" help:"The link's code."`
	ruleFlags
	NoRules     bool  `name:"no-rules" help:"Remove the link's rules."`
	NoPassword  bool  `name:"no-password" help:"Remove the link's password."`
	MaxClicks   int64 `name:"max-clicks" help:"A new click limit."`
	NoMaxClicks bool  `name:"no-max-clicks" help:"Remove the link's click limit."`
}

func (c *linksSetCmd) Run(ctx context.Context, l *linksCmd, stdout io.Writer) error {
	rules, password, err := c.ruleFlags.read("links set")
	if err != nil {
		return err
	}
	fields := map[string]any{}
	switch {
	case c.NoRules && rules != nil:
		return usageError{errors.New("links set: give rules or --no-rules, not both")}
	case c.NoRules:
		fields["rules"] = []apiwire.Rule{}
	case rules != nil:
		fields["rules"] = rules
	}
	switch {
	case c.NoPassword && password != "":
		return usageError{errors.New("links set: give --password-file or --no-password, not both")}
	case c.NoPassword:
		fields["password"] = nil
	case password != "":
		fields["password"] = password
	}
	switch {
	case c.NoMaxClicks && c.MaxClicks != 0:
		return usageError{errors.New("links set: give --max-clicks or --no-max-clicks, not both")}
	case c.NoMaxClicks:
		fields["max_clicks"] = nil
	case c.MaxClicks != 0:
		fields["max_clicks"] = c.MaxClicks
	}
	if len(fields) == 0 {
		return usageError{errors.New("links set: nothing to change; give --rule, --rules-file, --no-rules, --password-file, --no-password, --max-clicks or --no-max-clicks")}
	}
	cl, err := l.client()
	if err != nil {
		return err
	}
	li, err := cl.Patch(ctx, c.Code, fields)
	if err != nil {
		return fmt.Errorf("links set %s: %w", c.Code, err)
	}
	return l.show(stdout, "changed "+li.ShortURL, li)
}
