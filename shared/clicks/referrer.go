package clicks

// ReferrerHost returns the host of a Referer header value, lower-cased,
// without scheme, credentials, port, path, query or fragment, cut to
// MaxReferrerLen; nil when there is none or it is not an absolute
// http(s) URL (an "android-app://" referrer keeps its package name as host).
// It writes into dst (at least MaxReferrerLen bytes) and does not allocate.
// Only the host is kept: the full referrer URL can carry personal data.
func ReferrerHost(dst, ref []byte) []byte {
	i := indexString(ref, "://")
	if i <= 0 || i > 32 {
		return nil
	}
	for _, c := range ref[:i] {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return nil
		}
	}
	rest := ref[i+3:]
	end := len(rest)
	for j, c := range rest {
		if c == '/' || c == '?' || c == '#' || c == '\\' {
			end = j
			break
		}
	}
	host := rest[:end]
	if at := lastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if len(host) > 0 && host[0] == '[' { // IPv6 literal: keep the brackets, drop the port
		if k := indexByte(host, ']'); k > 0 {
			host = host[:k+1]
		}
	} else if k := lastIndexByte(host, ':'); k >= 0 {
		host = host[:k]
	}
	for len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	if len(host) == 0 {
		return nil
	}
	out := dst[:0]
	for _, c := range host {
		if len(out) == MaxReferrerLen {
			break
		}
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c < 0x21 || c > 0x7e:
			c = '?' // a header is bytes; the rollup stores text
		}
		out = append(out, c)
	}
	return out
}

func indexString(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}
