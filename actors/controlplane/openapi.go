package controlplane

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/codesession/codesession/actors/driver"
	"github.com/codesession/codesession/messages"
)

const routeOpenAPI = "GET /openapi.json"

// routeDoc describes one route of routes(): its request body and the data
// of its success envelope are the very types the handler decodes and
// writes, so the schemas are generated from them (nil: no JSON body).
type routeDoc struct {
	summary  string
	request  reflect.Type
	response reflect.Type
	open     bool   // no bearer token needed
	media    string // a response that is not the JSON envelope: its media type
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// routeDocs is every route's description, by its mux pattern. TestOpenAPI
// walks the route table and fails on a route missing here (or a doc with
// no route).
var routeDocs = map[string]routeDoc{
	routeHealthz:                             {summary: "liveness", response: typeOf[map[string]string](), open: true},
	routeOpenAPI:                             {summary: "this description (OpenAPI 3.1)", open: true, media: "application/json"},
	"GET /metrics":                           {summary: "Prometheus metrics", media: "text/plain"},
	"GET /api/backends":                      {summary: "list-backends: the capability matrix", response: typeOf[messages.ListBackendsResult]()},
	"GET /api/code-sessions":                 {summary: "the token's session records, newest first", response: typeOf[sessionsView]()},
	"POST /api/code-sessions":                {summary: "start a session", request: typeOf[messages.Start](), response: typeOf[messages.StartResult]()},
	"GET /api/code-sessions/{id}":            {summary: "a session's record and events (?afterSeq=&limit=)", response: typeOf[sessionView]()},
	"POST /api/code-sessions/{id}/read-turn": {summary: "long-poll the next read-turn result", request: typeOf[readTurnRequest](), response: typeOf[messages.TurnResult]()},
	"POST /api/code-sessions/{id}/answer":    {summary: "answer a clarification", request: typeOf[answerRequest](), response: typeOf[messages.AnswerResult]()},
	"POST /api/code-sessions/{id}/guidance":  {summary: "send user guidance", request: typeOf[guidanceRequest](), response: typeOf[messages.OKResult]()},
	"POST /api/code-sessions/{id}/posture":   {summary: "change the posture", request: typeOf[postureRequest](), response: typeOf[messages.SetPostureResult]()},
	"POST /api/code-sessions/{id}/interrupt": {summary: "interrupt the running turn", request: typeOf[struct{}](), response: typeOf[messages.OKResult]()},
	"POST /api/code-sessions/{id}/stop":      {summary: "stop with a verdict (none: inferred)", request: typeOf[stopRequest](), response: typeOf[messages.StopResult]()},
	"POST /api/code-sessions/{id}/resume":    {summary: "resume an ended, failed or orphaned session", request: typeOf[resumeRequest](), response: typeOf[messages.StartResult]()},
	"GET /api/approvals":                     {summary: "capability approvals, pending first (admin tokens)", response: typeOf[approvalsView]()},
	"POST /api/approvals":                    {summary: "approve or deny a capability approval (admin tokens)", request: typeOf[messages.ApprovalDecision](), response: typeOf[messages.Approval]()},
	"POST /api/delegations":                  {summary: "dispatch a driver persona on a brief (default token)", request: typeOf[delegateRequest](), response: typeOf[driver.Record]()},
	"GET /api/delegations":                   {summary: "delegation records, newest first (default token)", response: typeOf[DelegationsView]()},
	"GET /api/delegations/{id}":              {summary: "a delegation and its driven sessions' records (default token)", response: typeOf[DelegationView]()},
	"POST /api/delegations/{id}/cancel":      {summary: "end a delegation; its sessions are released (default token)", response: typeOf[driver.Record]()},
	"GET /api/events":                        {summary: "the live feed (SSE; ?sessionId=&topics=&afterSeq=, Last-Event-ID resumes)", media: "text/event-stream"},
	"GET /api/scope":                         {summary: "the token's scope and its constraints", response: typeOf[scopeView]()},
	"PUT /api/scope":                         {summary: "set the scope's constraints (admin tokens)", request: typeOf[scopeRequest](), response: typeOf[scopeView]()},
	"GET /{$}":                               {summary: "the web console (or its login form)", open: true, media: "text/html"},
	"GET /ui/{file...}":                      {summary: "the web console's assets", open: true, media: "application/octet-stream"},
	"POST /ui/login":                         {summary: "trade the bearer token for the console's cookie", open: true, media: "text/html"},
	"POST /ui/logout":                        {summary: "clear the console's cookie", open: true, media: "text/html"},
	"/mcp":                                   {summary: "the code_session tool over MCP streamable HTTP (POST, GET, DELETE)", media: "application/json"},
}

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
	openAPIErr  error
)

// openAPI is the description of every route in routeDocs, built once.
func openAPI() ([]byte, error) {
	openAPIOnce.Do(func() { openAPIDoc, openAPIErr = buildOpenAPI() })
	return openAPIDoc, openAPIErr
}

func buildOpenAPI() ([]byte, error) {
	schema := func(t reflect.Type) (*jsonschema.Schema, error) {
		return jsonschema.ForType(t, &jsonschema.ForOptions{IgnoreInvalidTypes: true, TypeSchemas: map[reflect.Type]*jsonschema.Schema{
			// marshalled as Go duration text ("30m0s"), not nanoseconds
			reflect.TypeFor[messages.Duration](): {Type: "string", Description: "a Go duration, e.g. 30m0s"},
		}})
	}
	paths := map[string]map[string]any{}
	patterns := make([]string, 0, len(routeDocs))
	for p := range routeDocs {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		d := routeDocs[p]
		method, path, ok := strings.Cut(p, " ")
		methods := []string{strings.ToLower(method)}
		if !ok { // a pattern with no method: /mcp
			path, methods = method, []string{"post", "get", "delete"}
		}
		path = strings.ReplaceAll(strings.ReplaceAll(path, "{$}", ""), "...}", "}")
		op := map[string]any{"summary": d.summary, "operationId": p}
		if !d.open {
			op["security"] = []any{map[string]any{"bearer": []string{}}}
		}
		if d.request != nil {
			s, err := schema(d.request)
			if err != nil {
				return nil, err
			}
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": s}}}
		}
		ok200 := map[string]any{"description": "ok"}
		switch {
		case d.response != nil:
			s, err := schema(d.response)
			if err != nil {
				return nil, err
			}
			ok200["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{
				"type": "object", "required": []string{"ok", "data"},
				"properties": map[string]any{"ok": map[string]any{"const": true}, "data": s}}}}
		case d.media != "":
			ok200["content"] = map[string]any{d.media: map[string]any{}}
		}
		op["responses"] = map[string]any{"200": ok200, "default": map[string]any{"description": "an error envelope {ok: false, error: {code, op, message, ...}}"}}
		if strings.Contains(path, "{") {
			name := path[strings.Index(path, "{")+1 : strings.Index(path, "}")]
			op["parameters"] = []any{map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}}}
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		for _, m := range methods {
			paths[path][m] = op
		}
	}
	return json.Marshal(map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "codesession control plane", "version": "1"},
		"components": map[string]any{"securitySchemes": map[string]any{
			"bearer": map[string]any{"type": "http", "scheme": "bearer"}}},
		"paths": paths,
	})
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	b, err := openAPI()
	if err != nil {
		return messages.Wrap(messages.CodeInternal, "openapi", err, "cannot describe the routes")
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return nil
}
