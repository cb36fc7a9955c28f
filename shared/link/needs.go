package link

// Needs is the set of facts about a request a link's rules look at, so an
// edge learns only those (a User-Agent is classified only for a device
// condition, a country looked up only for a country condition).
type Needs uint8

// The facts rules can look at.
const (
	NeedsDevice   Needs = Needs(condDevice)
	NeedsCountry  Needs = Needs(condCountry)
	NeedsLanguage Needs = Needs(condLanguage)
	NeedsQuery    Needs = Needs(condQuery)
)

// Has reports whether n holds every fact of m.
func (n Needs) Has(m Needs) bool { return n&m == m }

// Needs returns the facts any of the rules looks at: what Facts must hold
// for Route to answer as it would with every fact known. A rule's facts
// count even if an earlier rule would match first: which one matches is
// what the facts decide. It does not allocate.
func (v *ExtrasView) Needs() Needs {
	var n Needs
	it := ruleIter{b: v.rules}
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		if r.devices != 0 {
			n |= NeedsDevice
		}
		if r.countries != nil {
			n |= NeedsCountry
		}
		if r.languages != nil {
			n |= NeedsLanguage
		}
		if r.query != nil {
			n |= NeedsQuery
		}
	}
	return n
}
