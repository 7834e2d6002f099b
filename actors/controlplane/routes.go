package controlplane

import (
	"net/http"

	"github.com/codesession/codesession/messages"
)

const routeHealthz = "GET /healthz"

// routes is every route of the control plane. All but /healthz require the
// bearer token. Any other method or path is a not_found envelope.
//
//	GET  /healthz                                   liveness (no auth)
//	GET  /openapi.json                              every route described (openapi.go; no auth)
//	GET  /metrics                                   Prometheus text
//	GET  /api/backends                              list-backends
//	GET  /api/code-sessions                         records, newest first
//	POST /api/code-sessions                         start
//	GET  /api/code-sessions/{id}?afterSeq=&limit=   record + events (+ externalAttach)
//	POST /api/code-sessions/{id}/read-turn          long poll {includeDiff?, timeoutMs?}
//	POST /api/code-sessions/{id}/answer             {clarificationId, decision, reason?, note?}
//	POST /api/code-sessions/{id}/guidance           user guidance {text, mode?, agentModel?, effort?}
//	POST /api/code-sessions/{id}/posture            {posture}
//	POST /api/code-sessions/{id}/interrupt          {}
//	POST /api/code-sessions/{id}/stop               {outcome?, note?}
//	POST /api/code-sessions/{id}/resume             {brief?} (a driven session: a fresh driver adopts it)
//	POST /api/delegations                           dispatch a driver {brief, agent?, cwd?, backend?, maxPosture?, ...}
//	GET  /api/delegations                           delegation records, newest first
//	GET  /api/delegations/{id}                      the record and its driven sessions' records
//	POST /api/delegations/{id}/cancel               end it (its sessions are released)
//	GET  /api/events?sessionId=&topics=&afterSeq=   SSE (Last-Event-ID resumes)
//	GET  /api/approvals                             capability approvals, pending first (admin tokens)
//	POST /api/approvals                             {id, decision: approve|deny} (admin tokens)
//	GET  /api/scope                                 the token's scope and its constraints
//	PUT  /api/scope                                 {maxPosture?, maxRounds?, allowedTools?, backends?} (admin tokens)
//	POST|GET|DELETE /mcp                            the code_session tool over MCP streamable HTTP (when Options.MCP)
//
// Every request runs under the owner scope of its token (scopes.go): it
// sees, and its ops reach, only that scope's sessions.
//
// The web console (package web) checks its own session cookie: GET / is
// the page (or the login form), GET /ui/{file} its assets, POST /ui/login
// trades the bearer token for the cookie, POST /ui/logout clears it.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.handle(mux, routeHealthz, true, s.healthz)
	s.handle(mux, routeOpenAPI, true, s.serveOpenAPI)
	s.handle(mux, "GET /metrics", false, s.serveMetrics)
	s.handle(mux, "GET /api/backends", false, s.listBackends)
	s.handle(mux, "GET /api/code-sessions", false, s.listSessions)
	s.handle(mux, "POST /api/code-sessions", false, s.start)
	s.handle(mux, "GET /api/code-sessions/{id}", false, s.getSession)
	s.handle(mux, "POST /api/code-sessions/{id}/read-turn", false, s.readTurn)
	s.handle(mux, "POST /api/code-sessions/{id}/answer", false, s.answer)
	s.handle(mux, "POST /api/code-sessions/{id}/guidance", false, s.guidance)
	s.handle(mux, "POST /api/code-sessions/{id}/posture", false, s.posture)
	s.handle(mux, "POST /api/code-sessions/{id}/interrupt", false, s.interrupt)
	s.handle(mux, "POST /api/code-sessions/{id}/stop", false, s.stop)
	s.handle(mux, "POST /api/code-sessions/{id}/resume", false, s.resume)
	s.handle(mux, "POST /api/delegations", false, s.delegate)
	s.handle(mux, "GET /api/delegations", false, s.listDelegations)
	s.handle(mux, "GET /api/delegations/{id}", false, s.getDelegation)
	s.handle(mux, "POST /api/delegations/{id}/cancel", false, s.cancelDelegation)
	s.handle(mux, "GET /api/events", false, s.events)
	s.handle(mux, "GET /api/approvals", false, s.listApprovals)
	s.handle(mux, "POST /api/approvals", false, s.decideApproval)
	s.handle(mux, "GET /api/scope", false, s.getScope)
	s.handle(mux, "PUT /api/scope", false, s.setScope)
	s.handle(mux, "GET /{$}", true, s.web.Page)
	s.handle(mux, "GET /ui/{file...}", true, s.web.Asset)
	s.handle(mux, "POST /ui/login", true, s.web.Login)
	s.handle(mux, "POST /ui/logout", true, s.web.Logout)
	if s.o.MCP != nil {
		s.handle(mux, "/mcp", false, func(w http.ResponseWriter, r *http.Request) error {
			if s.scopeOf(r) != s.o.Scope {
				// the MCP host drives the default scope's sessions: another
				// scope's token must not reach them through it
				return messages.Errorf(messages.CodeUnauthorized, "mcp", "/mcp serves the default token's scope only")
			}
			s.o.MCP.ServeHTTP(w, r)
			return nil
		})
	}
	s.handle(mux, "/", false, s.noRoute)
	return mux
}
