package controlplane

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenAPI walks the route table: every route routes() registers is in
// /openapi.json (and every description has a route), and the live answers
// of the GET routes validate against the schemas generated for them.
func TestOpenAPI(t *testing.T) {
	f := newFixture(t)
	require.NotEmpty(t, f.d.srv.patterns)
	registered := map[string]bool{}
	for _, p := range f.d.srv.patterns {
		if p == "/" {
			continue // the not_found fallback
		}
		registered[p] = true
		assert.Contains(t, routeDocs, p, "route %q is not described in routeDocs (openapi.go)", p)
	}
	for p := range routeDocs {
		assert.True(t, registered[p], "routeDocs describes %q, which routes() does not register", p)
	}

	res, err := http.Get(f.srv.URL + "/openapi.json") // no token: the description is open
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	for p := range registered {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "POST", method
		}
		path = strings.ReplaceAll(strings.ReplaceAll(path, "{$}", ""), "...}", "}")
		assert.Contains(t, doc.Paths[path], strings.ToLower(method), "%s", p)
	}

	// the handlers' answers match the schemas generated from their types
	sid := f.start("hello").SessionID
	f.read(sid)
	for route, url := range map[string]string{
		"GET /api/backends":           "/api/backends",
		"GET /api/code-sessions":      "/api/code-sessions",
		"GET /api/code-sessions/{id}": "/api/code-sessions/" + sid,
		"GET /api/scope":              "/api/scope",
	} {
		r := f.call("GET", url, nil)
		require.True(t, r.OK, "%s: %+v", route, r.Error)
		var op struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Properties map[string]*jsonschema.Schema `json:"properties"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		}
		method, path, _ := strings.Cut(route, " ")
		require.NoError(t, json.Unmarshal(doc.Paths[path][strings.ToLower(method)], &op), route)
		s := op.Responses["200"].Content["application/json"].Schema.Properties["data"]
		require.NotNil(t, s, route)
		resolved, err := s.Resolve(nil)
		require.NoError(t, err, route)
		var data any
		require.NoError(t, json.Unmarshal(r.Data, &data))
		assert.NoError(t, resolved.Validate(data), "%s answers what its schema says", route)
	}
}
