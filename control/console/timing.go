package console

import (
	"net/http"
	"strconv"
	"time"
)

// timedWriter adds a Server-Timing header to an answer: the time from the
// request's arrival in the console's handler to its header being written,
// which for a page is everything the server does for it (the session read,
// the queries, the template rendered into a buffer), and not the network.
// Browsers show it in their developer tools; bench/console reads it.
type timedWriter struct {
	http.ResponseWriter
	start time.Time
	wrote bool
}

// serverTimingName is the metric's name in the header: console;dur=12.345
// (milliseconds, as Server-Timing has them).
const serverTimingName = "console"

func (w *timedWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		ms := float64(time.Since(w.start).Microseconds()) / 1000
		w.Header().Set("Server-Timing", serverTimingName+";dur="+strconv.FormatFloat(ms, 'f', 3, 64))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *timedWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets a handler that streams (progress) flush through the wrapper.
func (w *timedWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *timedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
