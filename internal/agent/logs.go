package agent

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/hetsched/hetsched/internal/agent/executor"
)

// logHandler serves GET /logs/{task}?attempt=&stream=&follow= to the
// server (bearer token: the one the agent registered). Errors are the
// API's error object.
func logHandler(exec func() *executor.Executor, token string) http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, status int, code, field, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "field": field, "message": msg}})
	}
	mux.HandleFunc("GET /logs/{task}", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			fail(w, http.StatusUnauthorized, "unauthenticated", "", "wrong or missing token")
			return
		}
		q := r.URL.Query()
		attempt := -1 // the latest
		if v := q.Get("attempt"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				fail(w, http.StatusBadRequest, "invalid_argument", "attempt", "must be a non-negative integer")
				return
			}
			attempt = n
		}
		stream := q.Get("stream")
		if stream != "" && stream != "stdout" && stream != "stderr" {
			fail(w, http.StatusBadRequest, "invalid_argument", "stream", "must be stdout or stderr")
			return
		}
		follow := q.Get("follow") == "true"
		x := exec()
		if x == nil {
			fail(w, http.StatusServiceUnavailable, "unavailable", "", "the agent has not connected to the server yet")
			return
		}
		rc, err := x.OpenLog(r.Context(), r.PathValue("task"), attempt, stream, follow)
		if errors.Is(err, executor.ErrNoLog) {
			fail(w, http.StatusNotFound, "not_found", "id", "no logs of that task attempt on this node")
			return
		}
		if err != nil {
			fail(w, http.StatusServiceUnavailable, "unavailable", "", err.Error())
			return
		}
		defer rc.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		flusher := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := rc.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if follow {
					_ = flusher.Flush()
				}
			}
			if err == io.EOF || err != nil {
				return
			}
		}
	})
	return mux
}
