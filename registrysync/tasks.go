package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Tools whose definition says execution.taskSupport "required" cannot be called with a plain
// tools/call (MCP 2025-11-25 tasks): the server answers an error. The connector calls them as
// tasks instead — tools/call with a task, tasks/get until the task ends, then tasks/result —
// all within the call's timeout, so that for the executor, and the model, such a tool is called
// like any other. A task that asks for input (input_required) is cancelled: mcpstream has no
// user to ask. A call whose deadline passes cancels its task (tasks/cancel).

// Task polling bounds: the server's pollInterval is honoured within them (1 s without one).
const (
	minTaskPoll     = 100 * time.Millisecond
	maxTaskPoll     = 5 * time.Second
	defaultTaskPoll = time.Second
)

// taskToolNames returns the names of the tools in a tools listing whose definition requires
// task augmentation. Members are read by their exact names, as the catalog reads them.
func taskToolNames(items []json.RawMessage) map[string]bool {
	var out map[string]bool
	for _, item := range items {
		var d map[string]json.RawMessage
		if json.Unmarshal(item, &d) != nil {
			continue
		}
		var exec map[string]json.RawMessage
		var support, name string
		if json.Unmarshal(d["execution"], &exec) != nil || json.Unmarshal(exec["taskSupport"], &support) != nil ||
			support != string(mcp.TaskSupportRequired) || json.Unmarshal(d["name"], &name) != nil || name == "" {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[name] = true
	}
	return out
}

// setTaskTools records which tools of the last tools listing must be called as tasks.
func (c *connector) setTaskTools(items []json.RawMessage) {
	names := taskToolNames(items)
	c.mu.Lock()
	c.taskTools = names
	c.mu.Unlock()
}

// needsTask reports whether tool must be called as a task.
func (c *connector) needsTask(tool string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.taskTools[tool]
}

// taskHead is the part of a task-augmented tools/call answer (CreateTaskResult) and of a
// tasks/get answer the connector reads.
type taskHead struct {
	TaskID  string
	Status  string
	Message string
	Poll    time.Duration // the server's pollInterval within the bounds; 0 if it sent none
}

// createdTask reads the task of a task-augmented tools/call answer: ok is false when the answer
// holds no task (the server ran the tool at once: raw is its result).
func createdTask(raw json.RawMessage) (task taskHead, ok bool, bad string) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || len(top["task"]) == 0 || isNull(top["task"]) {
		return taskHead{}, false, ""
	}
	task, bad = readTask(top["task"])
	if bad == "" && task.TaskID == "" {
		bad = "the server answered a task without a taskId"
	}
	return task, true, bad
}

// readTask reads a Task (a CreateTaskResult's task, a tasks/get answer). Members are read as
// mcp-go reads a tasks/get answer: by exact name, one of another type ignored (a pollInterval of
// 250.5 or "250" does not make a CreateTaskResult a result without a task).
func readTask(raw json.RawMessage) (task taskHead, bad string) {
	var t map[string]any
	if json.Unmarshal(raw, &t) != nil || t == nil {
		return taskHead{}, "the server answered a task that is not a JSON object"
	}
	task.TaskID, _ = t["taskId"].(string)
	task.Status, _ = t["status"].(string)
	task.Message, _ = t["statusMessage"].(string)
	if ms, isNum := t["pollInterval"].(float64); isNum {
		task.Poll = taskPoll(ms)
	}
	return task, ""
}

// taskPoll is the wait a pollInterval of ms milliseconds asks for, within the bounds (any
// number: negative, zero or past what a time.Duration holds).
func taskPoll(ms float64) time.Duration {
	switch {
	case !(ms > float64(minTaskPoll/time.Millisecond)):
		return minTaskPoll
	case ms > float64(maxTaskPoll/time.Millisecond):
		return maxTaskPoll
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// maxTaskGetFailures is how many tasks/get in a row may fail (a transport error, not an answer)
// before the call ends outcome_unknown: tasks/get only reads, and one failure (a proxy's 503)
// must not abandon a task that is running well.
const maxTaskGetFailures = 3

// callToolTask calls tool as a task (see above). The callResult is what callTool would give for
// the final tasks/result answer; bad is set when the server broke the task protocol or the task
// could not complete (cancelled by the server, or asking for input).
func (s *session) callToolTask(ctx context.Context, tool string, args json.RawMessage) callResult {
	ttl := int64(5 * time.Minute / time.Millisecond)
	if d, ok := ctx.Deadline(); ok {
		ttl = max(time.Until(d).Milliseconds(), 1000)
	}
	taskParam, _ := json.Marshal(mcp.TaskParams{TTL: &ttl})
	r, fast := s.fastToolCall(ctx, tool, args, taskParam)
	if !fast {
		req := mcp.CallToolRequest{Header: s.paramHeaders(tool, args)}
		req.Params.Name = tool
		if len(args) > 0 {
			req.Params.Arguments = args
		}
		req.Params.Task = &mcp.TaskParams{TTL: &ttl}
		cctx, cp := withCapture(ctx)
		_, err := s.cl.CallTool(cctx, req)
		sent, raw, rpcErr, terr := cp.snapshot()
		if err == nil && terr != nil {
			err = terr
		}
		r = callResult{raw: raw, rpcErr: rpcErr, sent: sent, err: err}
		if br, ok := s.brokenResult(toolsCallWhat(tool), raw, rpcErr, err); ok {
			r = br
		} else if refused := refusedRPCError(cp, raw, rpcErr); refused != nil {
			r = callResult{err: err, refused: refused} // no task was created
		} else if raw == nil && rpcErr == nil {
			r.sent, r.refused = s.unrun(sent, err, cp) // not sent: no task was created
			if r.sent {
				r.retryAfterMs = unavailableRetryAfter(cp, time.Now())
			}
		}
	}
	if r.rpcErr != nil || r.raw == nil {
		return r
	}
	task, isTask, bad := createdTask(r.raw)
	if !isTask {
		return callResult{raw: r.raw, sent: true} // run at once, without a task: its result
	}
	if bad != "" {
		if task.TaskID != "" {
			s.cancelTask(task.TaskID)
		}
		return callResult{sent: true, bad: bad}
	}
	failures := 0
	// held: the Retry-After of the HTTP 429 or 503 that refused the last tasks/get, which the
	// next one waits at least (a server shedding load, asked again at the task's pollInterval,
	// was hammered).
	var held time.Duration
	for {
		switch mcp.TaskStatus(task.Status) {
		case mcp.TaskStatusCompleted, mcp.TaskStatusFailed:
			r := s.taskRequest(ctx, mcp.MethodTasksResult, task.TaskID)
			r.sent = true
			return r
		case mcp.TaskStatusCancelled:
			return callResult{sent: true, bad: "the server cancelled the task: " + task.Message}
		case mcp.TaskStatusInputRequired:
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: "the task asked for user input (input_required), which mcpstream does not provide; it was cancelled"}
		case mcp.TaskStatusWorking:
		default:
			s.cancelTask(task.TaskID)
			// (not cut here: the reply is redacted, then bounded)
			return callResult{sent: true, bad: "the server reported an unknown task status " + task.Status}
		}
		wait := defaultTaskPoll
		if task.Poll > 0 {
			wait = task.Poll
		}
		if held > 0 {
			// Only the Retry-After is compared with the deadline: one past it says the task is
			// not to be asked about before then, and waiting would only delay the timeout the
			// call ends with. A pollInterval past the deadline (the Retry-After within it) is
			// waited out until the deadline, as without a Retry-After: the call ends timeout as
			// any whose deadline passes, the server's Retry-After over by then.
			if d, ok := ctx.Deadline(); ok && time.Until(d) < held {
				s.cancelTask(task.TaskID)
				return callResult{sent: true, retryAfterMs: held.Milliseconds(), err: fmt.Errorf(
					"%w: tasks/get was refused, and the server asked not to be asked again for %s, past the deadline (HTTP 429 or 503 Retry-After)", errTaskHeldPastDeadline, held)}
			}
			wait = max(wait, held)
			held = 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			s.cancelTask(task.TaskID)
			return callResult{sent: true, err: ctx.Err()}
		case <-timer.C:
		}
		r := s.taskRequest(ctx, mcp.MethodTasksGet, task.TaskID)
		switch {
		case r.rpcErr != nil:
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: "tasks/get answered " + rpcErrorText(r.rpcErr, s.c.red.String)}
		case r.raw == nil && ended(ctx):
			s.cancelTask(task.TaskID)
			return callResult{sent: true, err: r.err}
		case r.raw == nil && errors.Is(r.err, errResponseTooLarge):
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: "the server's tasks/get answer is too large"}
		case r.bad != "":
			// (an answer that is not valid JSON, or came in a batch that was refused: the
			// server's protocol is broken, asking again would not mend it)
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: r.bad}
		case r.raw == nil && (errors.Is(r.err, errBadBatch) || errors.Is(r.err, errMalformedAnswer)):
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: "tasks/get: " + quote(s.c.red, r.err.Error(), 512)}
		case r.raw == nil:
			if !s.isLost() && failures+1 < maxTaskGetFailures {
				failures++
				held = time.Duration(r.retryAfterMs) * time.Millisecond
				continue // the task is still working as far as we know: ask again (not sooner than asked)
			}
			s.cancelTask(task.TaskID)
			return callResult{sent: true, err: r.err, retryAfterMs: r.retryAfterMs}
		}
		failures = 0
		got, bad := readTask(r.raw)
		if bad == "" && got.TaskID != "" && got.TaskID != task.TaskID {
			bad = "the server answered tasks/get about another task"
		}
		if bad != "" {
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: bad}
		}
		if got.Poll == 0 {
			got.Poll = task.Poll
		}
		got.TaskID = task.TaskID
		task = got
	}
}

// taskRequest sends tasks/get or tasks/result for the task id and returns the raw answer: on
// stdio the fast path's way (an answer mcp-go would drop, malformed or too large, ends it at
// once), elsewhere through mcp-go.
func (s *session) taskRequest(ctx context.Context, method mcp.MCPMethod, id string) callResult {
	quoted, _ := json.Marshal(id)
	if r, ok := s.fastRequest(ctx, string(method), nil, append([]byte(`"taskId":`), quoted...), true); ok {
		return r
	}
	cctx, cp := withCapture(ctx)
	var err error
	if method == mcp.MethodTasksResult {
		_, err = s.cl.TaskResult(cctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	} else {
		_, err = s.cl.GetTask(cctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	}
	sent, raw, rpcErr, terr := cp.snapshot()
	if err == nil && terr != nil {
		err = terr
	}
	if r, ok := s.brokenResult(string(method), raw, rpcErr, err); ok {
		return r // (bad: tasks/get is not asked again)
	}
	if refusedRPCError(cp, raw, rpcErr) != nil {
		// A JSON-RPC error as the body of a 429 (403, 405, 413, 415): a rate limiter's refusal
		// of this request, not the server's word about the task; as with a text body, tasks/get
		// is asked again.
		status, _ := cp.httpStatus()
		return callResult{sent: sent, retryAfterMs: heldFor(cp, time.Now()),
			err: fmt.Errorf("%s: the server refused the request with HTTP %d (%s)", method, status, http.StatusText(status))}
	}
	r := callResult{raw: raw, rpcErr: rpcErr, sent: sent, err: err}
	if raw == nil && rpcErr == nil {
		r.retryAfterMs = heldFor(cp, time.Now())
	}
	return r
}

// heldFor is the Retry-After, in milliseconds, of a request answered HTTP 429 or 503 (0 for
// another status, or none): not to be asked again sooner.
func heldFor(cp *capture, now time.Time) int64 {
	if status, retryAfter := cp.httpStatus(); status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		return retryAfterMs(retryAfter, now)
	}
	return 0
}

// errTaskHeldPastDeadline: a tasks/get was refused HTTP 429 or 503 with a Retry-After that runs
// past the call's deadline; the task was cancelled, and the call ends timeout at once.
var errTaskHeldPastDeadline = errors.New("the task cannot be asked about before the deadline")

// taskCancelTimeout bounds a tasks/cancel.
const taskCancelTimeout = 5 * time.Second

// cancelTask sends tasks/cancel off the caller's path, bounded, and never past the session:
// once, best effort, whatever the call ends with. One that fails (refused HTTP 429 by a server
// still shedding load, which asked not to be asked again sooner, or unanswered) is logged, not
// sent again: the task runs on the server until it ends or its ttl (the call's timeout) passes.
// One the server refuses with -32602 (a task that already ended, or one it does not know) is
// logged at info: nothing runs on.
func (s *session) cancelTask(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(s.ctx, taskCancelTimeout)
		defer cancel()
		cctx, cp := withCapture(ctx)
		_, err := s.cl.CancelTask(cctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}})
		if err == nil {
			return
		}
		_, _, rpcErr, _ := cp.snapshot()
		status, _ := cp.httpStatus()
		// -32602 is what the spec has a server answer for a task in a terminal status, or one
		// it does not know (expired): most often the task ended as the call's deadline passed.
		// It runs on nowhere; the server's word is logged, not warned.
		ended := rpcErr != nil && rpcErr.Code == mcp.INVALID_PARAMS && (status == 0 || status/100 == 2)
		msg := "tasks/cancel failed, not sent again: the task may run on the server until its ttl passes"
		ev := s.c.log.Warn()
		switch {
		case s.ctx.Err() != nil:
			ev = s.c.log.Debug() // the session closed under it: nothing more goes out on it
		case ended:
			ev = s.c.log.Info()
			msg = "tasks/cancel refused: the server says the task had already ended, or it does not know it (-32602); not sent again"
		}
		if rpcErr != nil {
			ev = ev.Int("code", rpcErr.Code)
		}
		if status != 0 && status/100 != 2 {
			ev = ev.Int("status", status)
			if ms := heldFor(cp, time.Now()); ms > 0 {
				ev = ev.Int64("retryAfterMs", ms)
			}
		}
		ev.Str("task", quote(s.c.red, id, 128)).Str("reason", quote(s.c.red, errText(err), 512)).Msg(msg)
	}()
}
