// Package domains is the launch gate's check of issue 20 on a whole stack
// (PostgreSQL, NATS, control and an edge, each real): every link redirects
// on its own domain and on no other, an unknown host is 404, and the codes
// an FF1 domain generates can be neither walked nor confused with reserved
// words or codes already taken.
package domains
