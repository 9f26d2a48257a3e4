package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// logs is GET /api/v1/tasks/{id}/logs?follow=&stream=stdout|stderr&
// attempt=N|previous=true. Only tasks with a command have logs; they are
// kept where the command ran, by the agent of the attempt's node, and
// proxied from it: the current attempt's, or while the task waits to run
// again its last attempt's; attempt= names one (the task's attempt
// numbers), previous=true the last ended one. The Hetsched-Attempt
// header says which attempt the body is. 503 when that agent is not
// connected.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.owned(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	for _, k := range []string{"follow", "previous"} {
		if v := q.Get(k); v != "" && v != "true" && v != "false" {
			writeError(w, errs.Invalid(k, "must be true or false, got %q", v))
			return
		}
	}
	if v := q.Get("stream"); v != "" && v != "stdout" && v != "stderr" {
		writeError(w, errs.Invalid("stream", "must be stdout or stderr, got %q", v))
		return
	}
	if len(rec.Spec.Command) == 0 {
		writeError(w, errs.Invalid("id", "task %q is a lease (it has no command), so it has no logs", rec.Spec.ID))
		return
	}
	node, attempt, err := logAttempt(rec, q.Get("attempt"), q.Get("previous") == "true")
	if err != nil {
		writeError(w, err)
		return
	}
	base, token, ok := s.eng.AgentLogs(node)
	if !ok {
		writeError(w, errs.New(errs.Unavailable, "", "the logs of task %q (attempt %d) are kept by the agent of node %q, and no agent serves that node now", rec.Spec.ID, attempt, node))
		return
	}
	w.Header().Set("Hetsched-Attempt", strconv.Itoa(attempt))
	s.proxyLogs(w, r, base, token, rec.Spec.ID, attempt)
}

// logAttempt is the node and number of the attempt whose logs a request
// reads: the one named by attempt (a number), the last ended one with
// previous, else the current one, or the last ended one while the task
// waits to run again.
func logAttempt(rec *engine.TaskRecord, attempt string, previous bool) (node string, n int, err error) {
	last := len(rec.Attempts) - 1
	switch {
	case attempt != "" && previous:
		return "", 0, errs.Invalid("previous", "attempt and previous exclude each other")
	case attempt != "":
		n, err := strconv.Atoi(attempt)
		if err != nil || n < 0 {
			return "", 0, errs.Invalid("attempt", "must be a non-negative attempt number, got %q", attempt)
		}
		if n == rec.Attempt && rec.Node != "" {
			return rec.Node, n, nil
		}
		for _, a := range rec.Attempts {
			if a.Attempt == n && a.Node != "" {
				return a.Node, n, nil
			}
		}
		if n == rec.Attempt {
			return "", 0, errs.New(errs.Conflict, "attempt", "attempt %d of task %q has not been placed yet (state %s): no logs so far", n, rec.Spec.ID, rec.State)
		}
		return "", 0, errs.New(errs.NotFound, "attempt", "task %q has no attempt %d on record (%s)", rec.Spec.ID, n, attemptsOnRecord(rec))
	case previous:
		if last < 0 {
			return "", 0, errs.New(errs.NotFound, "previous", "task %q has no earlier attempt (this is attempt %d)", rec.Spec.ID, rec.Attempt)
		}
		return rec.Attempts[last].Node, rec.Attempts[last].Attempt, nil
	case rec.Node != "":
		return rec.Node, rec.Attempt, nil
	case last >= 0:
		return rec.Attempts[last].Node, rec.Attempts[last].Attempt, nil
	}
	return "", 0, errs.New(errs.Conflict, "id", "task %q has not been placed yet (state %s): no logs so far", rec.Spec.ID, rec.State)
}

// attemptsOnRecord says which attempts a task's record knows.
func attemptsOnRecord(rec *engine.TaskRecord) string {
	var ns []string
	for _, a := range rec.Attempts {
		ns = append(ns, strconv.Itoa(a.Attempt))
	}
	if rec.Node != "" {
		ns = append(ns, strconv.Itoa(rec.Attempt))
	}
	if len(ns) == 0 {
		return "none placed yet"
	}
	return fmt.Sprintf("attempts with logs: %s; at most the last %d are kept", strings.Join(ns, ", "), engine.MaxAttempts)
}

// proxyLogs streams a task's logs from the agent that ran it.
func (s *Server) proxyLogs(w http.ResponseWriter, r *http.Request, base, token, task string, attempt int) {
	q := url.Values{}
	q.Set("attempt", strconv.Itoa(attempt))
	follow := r.URL.Query().Get("follow") == "true"
	if follow {
		q.Set("follow", "true")
	}
	if v := r.URL.Query().Get("stream"); v != "" {
		q.Set("stream", v)
	}
	ctx := r.Context()
	var cancel context.CancelFunc
	if !follow {
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/logs/"+url.PathEscape(task)+"?"+q.Encode(), nil)
	if err != nil {
		writeError(w, errs.New(errs.Unavailable, "", "the agent's log address %q is unusable: %v", base, err))
		return
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.logClient.Do(req)
	if err != nil {
		writeError(w, errs.New(errs.Unavailable, "", "the agent keeping the logs of task %q does not answer: %v", task, err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
		code := errs.Unavailable
		if resp.StatusCode == http.StatusNotFound {
			code = errs.NotFound
		}
		writeError(w, errs.New(code, "id", "the agent has no logs for task %q: %s", task, body.Error.Message))
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if follow {
				_ = rc.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
