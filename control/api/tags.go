package api

import (
	"errors"
	"net/http"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// tagBody is a bulk tag change: add and remove on every one of codes, all
// on domain ("" or left out: the platform's).
type tagBody struct {
	Domain string   `json:"domain"`
	Codes  []string `json:"codes"`
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
}

var tagShape = jsonObject(
	into(jsonField("domain", jsonString), func(b *tagBody, v jsonValue) { b.Domain = v.str }),
	into(jsonField("codes", jsonArray(jsonString)), func(b *tagBody, v jsonValue) { b.Codes = append(b.Codes, v.str) }),
	into(jsonField("add", jsonArray(jsonString)), func(b *tagBody, v jsonValue) { b.Add = append(b.Add, v.str) }),
	into(jsonField("remove", jsonArray(jsonString)), func(b *tagBody, v jsonValue) { b.Remove = append(b.Remove, v.str) }),
)

// tagLinks answers POST /api/v1/links/tags: the change is made on every
// link or on none, and the answer is the links as they are then, in the
// order of codes, as a list page without a next page.
func (s *Server) tagLinks(w http.ResponseWriter, r *http.Request, tenant int64) {
	var in tagBody
	// 1,000 codes of 32 characters and 40 tags of 64 fit well within it.
	if err := decodeJSON(w, r, &in, tagShape, MaxBodyBytes, "application/json"); err != nil {
		writeBodyError(w, r, err)
		return
	}
	var domain string
	if in.Domain != "" {
		var err error
		if domain, err = s.linkDomain("domain", in.Domain); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	ls, err := s.links.TagLinks(r.Context(), tenant, links.TagChange{Domain: domain, Codes: in.Codes, Add: in.Add, Remove: in.Remove})
	if err != nil {
		// The codes not found are the client's to know: they are its own.
		if errors.Is(err, link.ErrNotFound) {
			writeProblem(w, r, http.StatusNotFound, err.Error())
			return
		}
		s.writeError(w, r, err)
		return
	}
	now := s.cfg.Now()
	s.writeBody(w, http.StatusOK, func(b []byte) []byte { return s.appendList(b, ls, 0, now) })
}
