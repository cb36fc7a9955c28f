package unlock

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/edgelink/edgelink/shared/passhash"
)

// The posted form: application/x-www-form-urlencoded, two fields.
const (
	// FieldPassword and FieldToken name the form's fields.
	FieldPassword = "password"
	FieldToken    = "csrf"
	// MaxBodyLen bounds a posted form: a password of MaxPasswordLen bytes
	// each percent-encoded (3 characters), the token and the names, with
	// room to spare. A longer body is refused unread.
	MaxBodyLen = 1024
)

// ErrBadForm wraps every reason ParseForm refuses a body.
var ErrBadForm = errors.New("unlock: not a password form")

// Form is a posted password form, decoded. Password and Token point into
// the Form's own buffer (Password) or the body (Token, which is base64url
// and needs no decoding); neither outlives the next ParseForm.
type Form struct {
	Password []byte
	Token    []byte
	// TooLong says the password had more than passhash.MaxPasswordLen
	// bytes: it cannot be a link's, and Password holds only its start.
	TooLong bool
	buf     [passhash.MaxPasswordLen]byte
}

// ParseForm decodes body, a urlencoded form, into f: its password and
// token fields, each at most once (a repeat is refused: which one would
// count is a guess), other fields ignored. Names and values are
// percent-decoded with '+' as a space, as browsers encode forms; a '%'
// not followed by two hex digits is refused. A body longer than
// MaxBodyLen, or without a token, is refused. The password's bytes are
// not judged here (passhash.CheckPassword is the rule). It does not
// allocate.
func ParseForm(body []byte, f *Form) error {
	*f = Form{}
	if len(body) > MaxBodyLen {
		return fmt.Errorf("%w: a body of %d bytes, at most %d", ErrBadForm, len(body), MaxBodyLen)
	}
	var havePassword, haveToken bool
	for len(body) > 0 {
		var pair []byte
		if i := indexByte(body, '&'); i >= 0 {
			pair, body = body[:i], body[i+1:]
		} else {
			pair, body = body, nil
		}
		if len(pair) == 0 {
			continue
		}
		name, value := pair, []byte(nil)
		if i := indexByte(pair, '='); i >= 0 {
			name, value = pair[:i], pair[i+1:]
		}
		var nameBuf [len(FieldPassword)]byte
		n, ok, over := decode(nameBuf[:], name)
		if !ok {
			return fmt.Errorf("%w: a malformed field name", ErrBadForm)
		}
		switch {
		case over:
			// Longer than either field's name: another field.
		case string(nameBuf[:n]) == FieldPassword:
			if havePassword {
				return fmt.Errorf("%w: the password field twice", ErrBadForm)
			}
			havePassword = true
			m, ok, over := decode(f.buf[:], value)
			if !ok {
				return fmt.Errorf("%w: a malformed password field", ErrBadForm)
			}
			f.Password, f.TooLong = f.buf[:m], over
		case string(nameBuf[:n]) == FieldToken:
			if haveToken {
				return fmt.Errorf("%w: the token field twice", ErrBadForm)
			}
			haveToken = true
			// A token is base64url: nothing in it is encoded, and
			// anything encoded is no token.
			if len(value) > TokenLen || !isBase64URL(value) {
				return fmt.Errorf("%w: a malformed token", ErrBadForm)
			}
			f.Token = value
		}
	}
	if !haveToken {
		return fmt.Errorf("%w: no token", ErrBadForm)
	}
	return nil
}

// decode percent-decodes src into dst ('+' as a space): n bytes written,
// ok false for a malformed escape, over true when dst was too small (the
// rest is checked, not written).
func decode(dst, src []byte) (n int, ok, over bool) {
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if i+2 >= len(src) {
				return n, false, over
			}
			hi, lo := unhex(src[i+1]), unhex(src[i+2])
			if hi > 15 || lo > 15 {
				return n, false, over
			}
			c = hi<<4 | lo
			i += 2
		}
		if n == len(dst) {
			over = true
			continue
		}
		dst[n] = c
		n++
	}
	return n, true, over
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

func isBase64URL(b []byte) bool {
	for _, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Message is what a form page says above the form.
type Message uint8

// The messages: none on the first view; the rest after a post.
const (
	MessageNone    Message = iota
	MessageWrong           // the password was not right
	MessageLimited         // too many attempts: wait
	MessageBusy            // no verification slot free: retry
	MessageExpired         // the form's token or cookie was refused: post again
	MessageBadForm         // the body was no form
)

var messages = [...]string{
	MessageNone:    "",
	MessageWrong:   "That password is not right.",
	MessageLimited: "Too many attempts. Wait a little, then try again.",
	MessageBusy:    "Too many people are unlocking links right now. Try again in a moment.",
	MessageExpired: "This form expired, or your browser did not send its cookie back. Enter the password again (cookies must be on).",
	MessageBadForm: "The form did not arrive whole. Enter the password again.",
}

// style is the page's only style, allowed by its hash in the page's CSP
// (no other style, no script, no image may load).
const style = `body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}` +
	`main{max-width:22rem;margin:12vh auto;padding:1.5rem;background:#fff;border:1px solid #d5d9de;border-radius:8px}` +
	`h1{font-size:1.25rem;margin:0 0 .5rem}label{display:block;margin:1rem 0 .25rem;font-weight:600}` +
	`input{box-sizing:border-box;width:100%;padding:.5rem;font:inherit;border:1px solid #8a929b;border-radius:4px}` +
	`button{margin-top:1rem;padding:.5rem 1rem;font:inherit;border:0;border-radius:4px;background:#1f5fbf;color:#fff}` +
	`p.error{color:#a3000b;font-weight:600}`

// ContentSecurityPolicy is the form page's CSP: nothing loads but its own
// inline style; no script at all; no page may frame it; no <base>. It has
// no form-action: the form's answer redirects (303 to the link, then the
// link to its target, another origin), and browsers apply form-action to
// every redirect of a submission, which would stop the visitor on the way
// to the target. The form's action is a fixed path on the edge itself.
var ContentSecurityPolicy = "default-src 'none'; style-src 'sha256-" + styleHash() + "'; base-uri 'none'; frame-ancestors 'none'"

func styleHash() string {
	sum := sha256.Sum256([]byte(style))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Page is a password form page: Action is the path (and query) the form
// posts to, Token its CSRF token, Message what it says above the form.
// Nothing of the link but its path is in it: never its target.
type Page struct {
	Action  []byte
	Token   []byte
	Message Message
}

// AppendPage appends p's HTML to dst, every variable part escaped.
func AppendPage(dst []byte, p *Page) []byte {
	dst = append(dst, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow, noarchive">
<meta name="referrer" content="no-referrer">
<title>Password required</title>
<style>`...)
	dst = append(dst, style...)
	dst = append(dst, `</style>
</head>
<body>
<main>
<h1>This link is protected</h1>
<p>Enter its password to continue.</p>
`...)
	if p.Message != MessageNone && int(p.Message) < len(messages) {
		dst = append(dst, `<p class="error" role="alert">`...)
		dst = appendEscaped(dst, messages[p.Message])
		dst = append(dst, "</p>\n"...)
	}
	dst = append(dst, `<form method="post" action="`...)
	dst = appendEscaped(dst, p.Action)
	dst = append(dst, `">
<input type="hidden" name="`+FieldToken+`" value="`...)
	dst = appendEscaped(dst, p.Token)
	dst = append(dst, `">
<label for="password">Password</label>
<input id="password" name="`+FieldPassword+`" type="password" required autofocus autocomplete="current-password" maxlength="128">
<button type="submit">Continue</button>
</form>
</main>
</body>
</html>
`...)
	return dst
}

// appendEscaped appends s with HTML's special characters escaped, so it
// can stand in text or in a double-quoted attribute.
func appendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			dst = append(dst, "&amp;"...)
		case '<':
			dst = append(dst, "&lt;"...)
		case '>':
			dst = append(dst, "&gt;"...)
		case '"':
			dst = append(dst, "&#34;"...)
		case '\'':
			dst = append(dst, "&#39;"...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
