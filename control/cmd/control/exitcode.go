package main

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/alecthomas/kong"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/shared/link"
)

// Exit codes, so scripts can tell what failed without reading the message
// (docs/cli.md lists them).
const (
	exitFailed      = 1 // anything else, and checks that found a problem (alloc verify, alloc witness)
	exitUsage       = 2 // the command line or its input was refused: nothing changed
	exitNotFound    = 3 // no such tenant, key or link
	exitConflict    = 4 // exists already, or in a state that refuses the change
	exitAuth        = 5 // the API key was refused
	exitUnavailable = 6 // the database or the API is unreachable, busy or rate limiting: retry later
)

// usageError is an error of the command line or its input.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// explained is err with a message written for a person; errors.Is and
// errors.As still see err.
type explained struct {
	msg string
	err error
}

func (e explained) Error() string { return e.msg }
func (e explained) Unwrap() error { return e.err }

// exitCode is the exit code of a command that failed with err.
func exitCode(err error) int {
	var (
		parse   *kong.ParseError
		usage   usageError
		problem *apiclient.Problem
		netErr  net.Error
	)
	switch {
	case errors.As(err, &parse), errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &problem):
		return statusExit(problem.Status)
	case errors.Is(err, link.ErrInvalidInput), errors.Is(err, link.ErrInvalidURL), errors.Is(err, link.ErrHost):
		return exitUsage
	case errors.Is(err, link.ErrNotFound), errors.Is(err, link.ErrDeleted):
		return exitNotFound
	case errors.Is(err, postgres.ErrTenantExists), errors.Is(err, postgres.ErrKeyRevoked),
		errors.Is(err, link.ErrCodeTaken), errors.Is(err, link.ErrIdempotencyConflict), errors.Is(err, link.ErrDomainTaken):
		return exitConflict
	case errors.Is(err, link.ErrUnauthorized):
		return exitAuth
	case errors.Is(err, link.ErrExhausted):
		return exitFailed // retrying will not help
	case errors.Is(err, link.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return exitUnavailable
	}
	return exitFailed
}

// statusExit is the exit code of an API answer's status.
func statusExit(status int) int {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return exitUsage
	case http.StatusNotFound, http.StatusGone:
		return exitNotFound
	case http.StatusConflict, http.StatusPreconditionFailed:
		return exitConflict
	case http.StatusUnauthorized, http.StatusForbidden:
		return exitAuth
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return exitUnavailable
	}
	return exitFailed
}
