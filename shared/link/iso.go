package link

// The codes rules name, as tables a lookup needs no allocation for.

// countryCodes are the 249 officially assigned ISO 3166-1 alpha-2 codes,
// plus XK (Kosovo), which is user-assigned in the standard but what the
// geo databases an edge reads (IPFire Location, MaxMind) give Kosovo's
// addresses.
const countryCodes = "" +
	"AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ " +
	"BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
	"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ " +
	"DE DJ DK DM DO DZ " +
	"EC EE EG EH ER ES ET " +
	"FI FJ FK FM FO FR " +
	"GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY " +
	"HK HM HN HR HT HU " +
	"ID IE IL IM IN IO IQ IR IS IT " +
	"JE JM JO JP " +
	"KE KG KH KI KM KN KP KR KW KY KZ " +
	"LA LB LC LI LK LR LS LT LU LV LY " +
	"MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ " +
	"NA NC NE NF NG NI NL NO NP NR NU NZ " +
	"OM " +
	"PA PE PF PG PH PK PL PM PN PR PS PT PW PY " +
	"QA " +
	"RE RO RS RU RW " +
	"SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ " +
	"TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ " +
	"UA UG UM US UY UZ " +
	"VA VC VE VG VI VN VU " +
	"WF WS " +
	"XK " +
	"YE YT " +
	"ZA ZM ZW"

// languageCodes are the 183 ISO 639-1 codes.
const languageCodes = "" +
	"aa ab ae af ak am an ar as av ay az " +
	"ba be bg bi bm bn bo br bs " +
	"ca ce ch co cr cs cu cv cy " +
	"da de dv dz " +
	"ee el en eo es et eu " +
	"fa ff fi fj fo fr fy " +
	"ga gd gl gn gu gv " +
	"ha he hi ho hr ht hu hy hz " +
	"ia id ie ig ii ik io is it iu " +
	"ja jv " +
	"ka kg ki kj kk kl km kn ko kr ks ku kv kw ky " +
	"la lb lg li ln lo lt lu lv " +
	"mg mh mi mk ml mn mr ms mt my " +
	"na nb nd ne ng nl nn no nr nv ny " +
	"oc oj om or os " +
	"pa pi pl ps pt " +
	"qu " +
	"rm rn ro ru rw " +
	"sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw " +
	"ta te tg th ti tk tl tn to tr ts tt tw ty " +
	"ug uk ur uz " +
	"ve vi vo " +
	"wa wo " +
	"xh " +
	"yi yo " +
	"za zh zu"

// countries and languages are bit sets over the 26×26 two-letter codes.
var countries, languages = codeSet(countryCodes, 'A'), codeSet(languageCodes, 'a')

type twoLetterSet [(26*26 + 63) / 64]uint64

func codeSet(list string, base byte) (s twoLetterSet) {
	for i := 0; i+1 < len(list); i += 3 {
		n := int(list[i]-base)*26 + int(list[i+1]-base)
		s[n/64] |= 1 << (n % 64)
	}
	return s
}

func (s *twoLetterSet) has(c0, c1, base byte) bool {
	if c0 < base || c0 >= base+26 || c1 < base || c1 >= base+26 {
		return false
	}
	n := int(c0-base)*26 + int(c1-base)
	return s[n/64]&(1<<(n%64)) != 0
}

// isCountry reports whether c is a country code a rule may name, in upper
// case.
func isCountry[S ~string | ~[]byte](c S) bool {
	return len(c) == 2 && countries.has(c[0], c[1], 'A')
}

// isLanguage reports whether c is an ISO 639-1 code, in lower case.
func isLanguage[S ~string | ~[]byte](c S) bool {
	return len(c) == 2 && languages.has(c[0], c[1], 'a')
}

// CanonicalCountry returns c as rules hold it (upper case) when it is an
// ISO 3166-1 alpha-2 code (or XK).
func CanonicalCountry(c string) (string, bool) {
	if len(c) != 2 {
		return "", false
	}
	u := string([]byte{upper(c[0]), upper(c[1])})
	return u, isCountry(u)
}

// CanonicalLanguage returns c as rules hold it (lower case) when it is an
// ISO 639-1 code.
func CanonicalLanguage(c string) (string, bool) {
	if len(c) != 2 {
		return "", false
	}
	l := string([]byte{lower(c[0]), lower(c[1])})
	return l, isLanguage(l)
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}
