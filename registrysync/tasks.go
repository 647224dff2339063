package registrysync

import (
	"context"
	"encoding/json"
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
	TaskID       string `json:"taskId"`
	Status       string `json:"status"`
	Message      string `json:"statusMessage"`
	PollInterval *int64 `json:"pollInterval"`
}

// callToolTask calls tool as a task (see above). The callResult is what callTool would give for
// the final tasks/result answer; bad is set when the server broke the task protocol or the task
// could not complete (cancelled by the server, or asking for input).
func (s *session) callToolTask(ctx context.Context, tool string, args json.RawMessage) callResult {
	ttl := int64(5 * time.Minute / time.Millisecond)
	if d, ok := ctx.Deadline(); ok {
		ttl = max(time.Until(d).Milliseconds(), 1000)
	}
	req := mcp.CallToolRequest{}
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
	if rpcErr != nil || raw == nil {
		return callResult{raw: raw, rpcErr: rpcErr, sent: sent, err: err}
	}
	var created struct {
		Task *taskHead `json:"task"`
	}
	if json.Unmarshal(raw, &created) != nil || created.Task == nil {
		return callResult{raw: raw, sent: true} // run at once, without a task: its result
	}
	task := *created.Task
	if task.TaskID == "" {
		return callResult{sent: true, bad: "the server answered a task without a taskId"}
	}
	for {
		switch mcp.TaskStatus(task.Status) {
		case mcp.TaskStatusCompleted, mcp.TaskStatusFailed:
			rctx, rcp := withCapture(ctx)
			_, err := s.cl.TaskResult(rctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskID}})
			_, raw, rpcErr, terr := rcp.snapshot()
			if err == nil && terr != nil {
				err = terr
			}
			return callResult{raw: raw, rpcErr: rpcErr, sent: true, err: err}
		case mcp.TaskStatusCancelled:
			return callResult{sent: true, bad: "the server cancelled the task: " + task.Message}
		case mcp.TaskStatusInputRequired:
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: "the task asked for user input (input_required), which mcpstream does not provide; it was cancelled"}
		case mcp.TaskStatusWorking:
		default:
			s.cancelTask(task.TaskID)
			return callResult{sent: true, bad: "the server reported an unknown task status " + truncate(task.Status, 64)}
		}
		wait := defaultTaskPoll
		if task.PollInterval != nil {
			wait = min(max(time.Duration(*task.PollInterval)*time.Millisecond, minTaskPoll), maxTaskPoll)
		}
		select {
		case <-ctx.Done():
			s.cancelTask(task.TaskID)
			return callResult{sent: true, err: ctx.Err()}
		case <-time.After(wait):
		}
		got, err := s.cl.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskID}})
		if err != nil {
			if ended(ctx) {
				s.cancelTask(task.TaskID)
			}
			return callResult{sent: true, err: err}
		}
		poll := task.PollInterval
		task = taskHead{TaskID: task.TaskID, Status: string(got.Status), Message: got.StatusMessage, PollInterval: got.PollInterval}
		if task.PollInterval == nil {
			task.PollInterval = poll
		}
	}
}

// cancelTask sends tasks/cancel off the caller's path, bounded, and never past the session.
func (s *session) cancelTask(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		_, _ = s.cl.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}})
	}()
}
