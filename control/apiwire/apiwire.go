// Package apiwire is the JSON that control's creator API answers with, as
// its server (control/api) writes it and its client (control/apiclient)
// reads it: one declaration, so the two cannot drift apart. The OpenAPI
// document (control/api/openapi.json) describes the same bodies.
package apiwire

import "fmt"

// Problem is an RFC 9457 problem details body. As an error it reads
// "status title: detail (request id)".
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("%d %s", p.Status, p.Title)
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	if p.RequestID != "" {
		s += " (request " + p.RequestID + ")"
	}
	return s
}

// Link is a link as the API answers it. Times are RFC 3339 in UTC;
// ExpiresAt is null for a link that never expires. Status is the link's
// effective state, as edges answer it: active, expired (active, but past
// ExpiresAt: edges answer 410), disabled or deleted.
type Link struct {
	Code string `json:"code"`
	// Domain is the host the link's code is on (the platform's for links
	// made without one); ShortURL is the code on that host, with the
	// scheme and port of control's --public-url.
	Domain       string  `json:"domain"`
	ShortURL     string  `json:"short_url"`
	URL          string  `json:"url"`
	URLOriginal  string  `json:"url_original"`
	RedirectType int     `json:"redirect_type"`
	Status       string  `json:"status"`
	Namespace    string  `json:"namespace"`
	ExpiresAt    *string `json:"expires_at"`
	Version      uint64  `json:"version"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    string  `json:"updated_at"`
	// Title is null for a link without one; Tags is [] for one without
	// any, else normalized and sorted. Edges never see either.
	Title *string  `json:"title"`
	Tags  []string `json:"tags"`
	// Rules route a click to another target by device, country, language
	// or query (docs/rules.md): [] for none; the first that matches wins,
	// the link's URL when none does.
	Rules []Rule `json:"rules"`
	// PasswordProtected: edges ask for the link's password before they
	// redirect. The password itself (or its hash) is never answered.
	PasswordProtected bool `json:"password_protected"`
	// MaxClicks is how many counted clicks the link redirects for; null
	// for no limit.
	MaxClicks *int64 `json:"max_clicks"`
	// ClicksCounted is how many of the link's clicks (bots among them)
	// the rollups have counted against its limit: when it reaches
	// MaxClicks the link's status is limit_reached and edges answer 410
	// (docs/click-limits.md). Null for a link without a limit.
	ClicksCounted *int64 `json:"clicks_counted"`
}

// Rule is one routing rule of a link: when every condition it sets holds,
// a click goes to URL. Within a condition the values are alternatives.
// Device names are ios, android and desktop; countries are ISO 3166-1
// alpha-2 codes (upper case in answers), languages ISO 639-1 codes (lower
// case), each ascending in answers.
type Rule struct {
	URL      string           `json:"url"`
	Device   []string         `json:"device,omitempty"`
	Country  []string         `json:"country,omitempty"`
	Language []string         `json:"language,omitempty"`
	Query    []QueryCondition `json:"query,omitempty"`
}

// QueryCondition holds when the click's query string has Param, or, when
// Equals is set, has Param with exactly that value.
type QueryCondition struct {
	Param  string  `json:"param"`
	Equals *string `json:"equals,omitempty"`
}

// BatchResult is one item's outcome in a batch create's answer: Link on
// 201, Error otherwise.
type BatchResult struct {
	Index  int      `json:"index"`
	Status int      `json:"status"`
	Link   *Link    `json:"link,omitempty"`
	Error  *Problem `json:"error,omitempty"`
}

// Domain is a domain as the API answers it: a host a tenant's links live
// on, with its own codes. Platform marks the platform's domain, which
// every tenant may use and only the operator configures. A null redirect
// answers 404; a null Robots serves the default robots.txt (everything
// disallowed). CodeMode is how generated codes are made: ff1 (keyed, not
// enumerable) or sequential. VerifiedAt is when ownership of the host was
// verified: null until then (nothing verifies it yet).
type Domain struct {
	Host             string  `json:"host"`
	Platform         bool    `json:"platform"`
	RootRedirect     *string `json:"root_redirect"`
	NotFoundRedirect *string `json:"not_found_redirect"`
	Robots           *string `json:"robots"`
	CodeMode         string  `json:"code_mode"`
	Status           string  `json:"status"`
	VerifiedAt       *string `json:"verified_at"`
	Version          uint64  `json:"version"`
}

// DomainList is the answer of GET /api/v1/domains: the tenant's domains,
// then the platform's.
type DomainList struct {
	Domains []Domain `json:"domains"`
}
