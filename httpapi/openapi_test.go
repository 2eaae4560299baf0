package httpapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"sort"
	"strings"
	"testing"

	"stratum/httpapi"
)

var update = flag.Bool("update", false, "rewrite httpapi/openapi.json from the registered routes")

// fullRoutes is every route of both listeners: New registers them all
// whichever services are set (a service is reached only by a request),
// so the routes table of an API without services is the founder's.
func fullRoutes() []httpapi.Route { return httpapi.New(httpapi.Deps{}).Routes() }

// openAPIPath turns httprouter syntax into OpenAPI's: ":name" and "*name"
// segments become "{name}".
func openAPIPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// pathParams lists the parameters of an httprouter path, in order.
func pathParams(p string) (names []string, catchAll map[string]bool) {
	catchAll = map[string]bool{}
	for _, s := range strings.Split(p, "/") {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			names = append(names, s[1:])
			catchAll[s[1:]] = s[0] == '*'
		}
	}
	return names, catchAll
}

func TestOpenAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"/healthz":                "/healthz",
		"/v1/iam/tokens/:tokenId": "/v1/iam/tokens/{tokenId}",
		"/v1/join/registrations/:joinId/release/*path": "/v1/join/registrations/{joinId}/release/{path}",
		"/v1/cluster/members/:nodeId/applied":          "/v1/cluster/members/{nodeId}/applied",
	} {
		if got := openAPIPath(in); got != want {
			t.Errorf("openAPIPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenAPICoversRoutes checks the document the founder serves names
// every route it registers, with its method, IAM action and auth.
func TestOpenAPICoversRoutes(t *testing.T) {
	f := newFixture(t, nil)
	r := f.json("GET", "/openapi.json", "", nil)
	if r.status != 200 {
		t.Fatalf("/openapi.json = %d", r.status)
	}
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Info       map[string]any                       `json:"info"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas         map[string]any `json:"schemas"`
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("/openapi.json is not an OpenAPI object: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	if doc.Info["title"] == nil || doc.Info["version"] == nil {
		t.Errorf("info lacks title or version: %v", doc.Info)
	}
	if doc.Components.Schemas["Error"] == nil {
		t.Error("components.schemas.Error (the error envelope) is missing")
	}
	if doc.Components.SecuritySchemes["bearer"] == nil {
		t.Error("components.securitySchemes.bearer is missing")
	}
	routes := fullRoutes()
	if len(routes) == 0 {
		t.Fatal("no routes registered")
	}
	for _, rt := range routes {
		p := openAPIPath(rt.Path)
		op, ok := doc.Paths[p][strings.ToLower(rt.Method)]
		if !ok {
			t.Errorf("%s %s (%s listener) is not in the OpenAPI document at paths[%q][%q]", rt.Method, rt.Path, rt.Listener, p, strings.ToLower(rt.Method))
			continue
		}
		if rt.Action != "" && op["x-action"] != rt.Action {
			t.Errorf("%s %s: x-action = %v, want %s", rt.Method, p, op["x-action"], rt.Action)
		}
		if rt.Auth == "bearer" && !strings.Contains(mustJSON(op["security"]), `"bearer"`) {
			t.Errorf("%s %s: security %s lacks bearer", rt.Method, p, mustJSON(op["security"]))
		}
		names, _ := pathParams(rt.Path)
		for _, n := range names {
			if !strings.Contains(mustJSON(op["parameters"]), `"name":"`+n+`"`) {
				t.Errorf("%s %s: path parameter %s not documented", rt.Method, p, n)
			}
		}
	}
}

// TestOpenAPIGenerate keeps httpapi/openapi.json equal to what the routes
// generate. After changing routes run:
//
//	go test ./httpapi -run TestOpenAPIGenerate -update
func TestOpenAPIGenerate(t *testing.T) {
	doc := generateOpenAPI(fullRoutes())
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote openapi.json: %d paths, %d bytes", len(doc["paths"].(map[string]any)), buf.Len())
		return
	}
	onDisk, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, buf.Bytes()) {
		t.Fatal("httpapi/openapi.json is not what the routes generate; run: go test ./httpapi -run TestOpenAPIGenerate -update")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// successStatus answers each route's success statuses where they are not
// the method's usual one (Route carries no status of its own).
var successStatus = map[string][]string{
	"POST /v1/iam/tokens":                               {"201"},
	"POST /v1/auth/logout":                              {"204"},
	"POST /v1/auth/password":                            {"204"},
	"POST /v1/admin/join/tokens":                        {"201"},
	"POST /v1/admin/releases":                           {"201"},
	"POST /v1/admin/releases/upload":                    {"201"},
	"POST /v1/join/registrations":                       {"200", "201"},
	"PUT /v1/cluster/nodes/:nodeId/release":             {"204"},
	"GET /v1/join/registrations/:joinId/release/*path":  {"200", "206", "304"},
	"HEAD /v1/join/registrations/:joinId/release/*path": {"200", "206", "304"},
}

// extraErrors are statuses a route answers beyond what its auth, action,
// parameters and method imply.
var extraErrors = map[string][]string{
	"POST /v1/auth/login":                               {"401", "429"},
	"POST /v1/auth/logout":                              {"403"},
	"POST /v1/auth/password":                            {"403", "409", "429"},
	"DELETE /v1/iam/sessions/:sessionId":                {"409"},
	"DELETE /v1/iam/tokens/:tokenId":                    {"409"},
	"DELETE /v1/admin/join/tokens/:tokenId":             {"409"},
	"POST /v1/join/registrations":                       {"409"},
	"POST /v1/join/registrations/:joinId/progress":      {"409"},
	"POST /v1/admin/join/registrations/:joinId/approve": {"409"},
	"POST /v1/admin/join/registrations/:joinId/reject":  {"409"},
	"POST /v1/admin/join/registrations/:joinId/cancel":  {"409"},
	"POST /v1/admin/cluster/members/:nodeId/remove":     {"409"},
	"POST /v1/admin/releases":                           {"409"},
	"POST /v1/admin/releases/upload":                    {"409", "413", "503"},
	"PUT /v1/admin/cluster/release":                     {"409"},
	"GET /v1/join/registrations/:joinId":                {"429"},
	"GET /v1/join/registrations/:joinId/release/*path":  {"416", "503"},
	"HEAD /v1/join/registrations/:joinId/release/*path": {"416", "503"},
}

// bodyLimits are request body limits other than 1 MiB.
var bodyLimits = map[string]string{
	"POST /v1/admin/releases/upload":        "64 GiB, 100,000 entries",
	"PUT /v1/cluster/nodes/:nodeId/release": "4 MiB",
	"PUT /v1/admin/inventory":               "8 MiB",
}

// queryParams are the query parameters of routes that take them.
var queryParams = map[string][]map[string]any{
	"POST /v1/admin/releases/upload": {
		{"name": "replace", "in": "query", "required": false, "description": "Replace an imported release of the same version whose content differs (audited).", "schema": map[string]any{"type": "boolean", "default": false}},
	},
	"GET /v1/admin/audit": {
		{"name": "after", "in": "query", "required": false, "description": "Return events with a sequence number above this one.", "schema": map[string]any{"type": "integer", "minimum": 0, "default": 0}},
		{"name": "limit", "in": "query", "required": false, "description": "At most this many events.", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
	},
	"GET /v1/admin/upgrades/release": {
		{"name": "view", "in": "query", "required": false, "description": "`summary`: the answer without `nodes[]`, with `members` (the number of members); `full` (the default): the whole set.", "schema": map[string]any{"type": "string", "enum": []string{"full", "summary"}}},
		{"name": "limit", "in": "query", "required": false, "description": "A page of `nodes[]` of at most this many nodes, with the head, `members` and `next` (absent on the last page); each page has its own ETag.", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
		{"name": "after", "in": "query", "required": false, "description": "The page starts after this member (in join order): the `next` of the previous page.", "schema": map[string]any{"type": "string"}},
	},
	"GET /v1/join/registrations/:joinId": {
		{"name": "wait", "in": "query", "required": false, "description": "Seconds to hold the answer while the state equals `state` (at most 60).", "schema": map[string]any{"type": "integer", "minimum": 0}},
		{"name": "state", "in": "query", "required": false, "description": "The state the caller last saw.", "schema": map[string]any{"type": "string"}},
	},
	"GET /v1/admin/join/registrations": {
		{"name": "state", "in": "query", "required": false, "description": "Only registrations in this state.", "schema": map[string]any{"type": "string"}},
		{"name": "index", "in": "query", "required": false, "description": "The `index` of an earlier answer; with `wait`, the answer is held while the list is unchanged.", "schema": map[string]any{"type": "string"}},
		{"name": "wait", "in": "query", "required": false, "description": "Seconds to hold the answer while the list's index equals `index` (at most 60).", "schema": map[string]any{"type": "integer", "minimum": 0}},
	},
}

// tarBodies are the routes whose body is a tar stream, not JSON.
var tarBodies = map[string]bool{"POST /v1/admin/releases/upload": true}

// requestSchemas are the request bodies known here by shape.
var requestSchemas = map[string]map[string]any{
	"POST /v1/auth/login": {
		"type": "object", "additionalProperties": false, "required": []string{"email", "password"},
		"properties": map[string]any{"email": map[string]any{"type": "string"}, "password": map[string]any{"type": "string", "format": "password"}},
	},
	"POST /v1/auth/password": {
		"type": "object", "additionalProperties": false, "required": []string{"currentPassword", "newPassword"},
		"properties": map[string]any{"currentPassword": map[string]any{"type": "string", "format": "password"}, "newPassword": map[string]any{"type": "string", "format": "password", "minLength": 12, "maxLength": 1024}},
	},
	"POST /v1/iam/tokens": {
		"type": "object", "additionalProperties": false, "required": []string{"name", "policy"},
		"properties": map[string]any{
			"name":   map[string]any{"type": "string", "maxLength": 128},
			"ttl":    map[string]any{"type": "string", "description": "A Go duration such as 24h; default 720h, at most 8784h; never past the calling token's own expiry."},
			"policy": map[string]any{"$ref": "#/components/schemas/Policy"},
		},
	},
}

var errorCodes = []string{
	"INVALID_INPUT", "INVALID_POLICY", "UNAUTHENTICATED", "JOIN_TOKEN_INVALID", "FORBIDDEN", "NOT_FOUND",
	"METHOD_NOT_ALLOWED", "RELEASE_MISMATCH", "JOIN_APPROVAL_REFUSED", "CONFLICT", "PAYLOAD_TOO_LARGE",
	"RANGE_NOT_SATISFIABLE", "TOO_MANY_REQUESTS", "INTERNAL", "NOT_IMPLEMENTED", "RELEASE_BUSY", "RELEASE_CORRUPT", "UNAVAILABLE",
}

var errorResponses = map[string]string{
	"400": "Bad input: INVALID_INPUT with `fields`, or INVALID_POLICY with `issues`; every problem at once.",
	"401": "UNAUTHENTICATED: missing or bad bearer token or credentials.",
	"403": "FORBIDDEN: authenticated but not authorized; the message names the action.",
	"404": "NOT_FOUND: no such resource.",
	"409": "CONFLICT, or the domain's conflict code (RELEASE_MISMATCH, JOIN_APPROVAL_REFUSED).",
	"413": "PAYLOAD_TOO_LARGE: the body is over its limit (1 MiB).",
	"416": "RANGE_NOT_SATISFIABLE: the Range lies outside the file.",
	"429": "TOO_MANY_REQUESTS: over the limit; see Retry-After.",
	"503": "RELEASE_BUSY (see Retry-After) or RELEASE_CORRUPT.",
}

func errorResponse(desc string) map[string]any {
	return map[string]any{
		"description": desc,
		"headers":     map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/RequestId"}},
		"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
	}
}

func securityOf(auth string) []map[string][]string {
	switch auth {
	case "bearer":
		return []map[string][]string{{"bearer": {}}}
	case "node-or-bearer":
		return []map[string][]string{{"nodeCertificate": {}}, {"bearer": {}}}
	case "node":
		return []map[string][]string{{"nodeCertificate": {}}}
	case "joiner-key":
		return []map[string][]string{{"joinerKey": {}}}
	}
	return []map[string][]string{}
}

func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, s := range strings.Split(path, "/") {
		s = strings.TrimLeft(s, ":*")
		s = strings.NewReplacer(".", "", "-", "").Replace(s)
		if s == "" {
			continue
		}
		b.WriteString(strings.ToUpper(s[:1]) + s[1:])
	}
	return b.String()
}

// generateOpenAPI builds the OpenAPI 3.1 document of routes.
func generateOpenAPI(routes []httpapi.Route) map[string]any {
	paths := map[string]any{}
	// A route on both listeners (GET /healthz) is one operation.
	type key struct{ method, path string }
	listeners := map[key][]string{}
	var order []key
	first := map[key]httpapi.Route{}
	for _, rt := range routes {
		k := key{rt.Method, rt.Path}
		if _, seen := first[k]; !seen {
			first[k] = rt
			order = append(order, k)
		}
		listeners[k] = append(listeners[k], rt.Listener)
	}
	for _, k := range order {
		rt := first[k]
		id := rt.Method + " " + rt.Path
		ls := listeners[k]
		sort.Strings(ls)
		op := map[string]any{
			"summary":     rt.Summary,
			"operationId": operationID(rt.Method, rt.Path),
			"tags":        ls,
			"x-listeners": ls,
			"x-auth":      rt.Auth,
			"security":    securityOf(rt.Auth),
		}
		if rt.Action != "" {
			op["x-action"] = rt.Action
		}
		var params []map[string]any
		names, catchAll := pathParams(rt.Path)
		for _, n := range names {
			p := map[string]any{"name": n, "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
			if catchAll[n] {
				p["description"] = "The rest of the path, slashes included."
			}
			params = append(params, p)
		}
		params = append(params, queryParams[id]...)
		if len(params) > 0 {
			op["parameters"] = params
		}
		hasBody := rt.Method == "POST" || rt.Method == "PUT" || rt.Method == "PATCH"
		if hasBody {
			schema := requestSchemas[id]
			if schema == nil {
				schema = map[string]any{"type": "object"}
			}
			content := map[string]any{"application/json": map[string]any{"schema": schema}}
			if tarBodies[id] {
				content = map[string]any{"application/x-tar": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
			}
			op["requestBody"] = map[string]any{"required": true, "content": content}
		}

		responses := map[string]any{}
		ok := successStatus[id]
		if ok == nil {
			ok = []string{"200"}
			if rt.Method == "DELETE" {
				ok = []string{"204"}
			}
		}
		for _, s := range ok {
			resp := map[string]any{"description": "Success.", "headers": map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/RequestId"}}}
			switch {
			case s == "204":
				resp["description"] = "Done; no body."
			case s == "304":
				resp["description"] = "Not modified (If-None-Match)."
			case rt.Method == "HEAD":
				resp["description"] = "Headers only: Content-Length, ETag, Accept-Ranges."
			case strings.Contains(rt.Path, "*"):
				resp["description"] = map[string]string{"200": "The whole file.", "206": "The requested range, with Content-Range."}[s]
				resp["content"] = map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
			case rt.Path == "/metrics":
				resp["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
			default:
				resp["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
			}
			responses[s] = resp
		}
		var errs []string
		if hasBody || queryParams[id] != nil {
			errs = append(errs, "400")
		}
		if rt.Auth != "none" {
			errs = append(errs, "401")
		}
		if rt.Action != "" || rt.Auth == "node" || rt.Auth == "node-or-bearer" {
			errs = append(errs, "403")
		}
		if len(names) > 0 {
			errs = append(errs, "404")
		}
		if hasBody {
			errs = append(errs, "413")
		}
		errs = append(errs, extraErrors[id]...)
		for _, s := range errs {
			desc := errorResponses[s]
			if limit, ok := bodyLimits[id]; ok && s == "413" {
				desc = strings.Replace(desc, "1 MiB", limit, 1)
			}
			responses[s] = errorResponse(desc)
		}
		responses["default"] = errorResponse("Any other error (INTERNAL, UNAVAILABLE...), as the error envelope.")
		op["responses"] = responses

		p := openAPIPath(rt.Path)
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(rt.Method)] = op
	}

	str := map[string]any{"type": "string"}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Stratum founder API",
			"version":     "1",
			"description": "The founder's admin API and join listener. Every non-2xx answer is the Error envelope with Content-Type application/json; every response carries X-Request-Id. Generated from the registered routes by httpapi's TestOpenAPIGenerate.",
		},
		"paths": paths,
		"components": map[string]any{
			"headers": map[string]any{
				"RequestId": map[string]any{"description": "Identifies the request in the founder's log.", "schema": str},
			},
			"securitySchemes": map[string]any{
				"bearer":          map[string]any{"type": "http", "scheme": "bearer", "description": "A login token (POST /v1/auth/login) or an API token (POST /v1/iam/tokens): sat1.<tokenId>.<secret>."},
				"nodeCertificate": map[string]any{"type": "mutualTLS", "description": "A client certificate issued by the cluster CA whose CommonName is the node id."},
				"joinerKey":       map[string]any{"type": "mutualTLS", "description": "The joiner's own (self-signed) client certificate; its key pin is its identity."},
			},
			"schemas": map[string]any{
				"Error": map[string]any{
					"type": "object", "required": []string{"code", "message"}, "additionalProperties": false,
					"properties": map[string]any{
						"code":    map[string]any{"type": "string", "enum": errorCodes},
						"message": map[string]any{"type": "string", "description": "One sentence a person can act on."},
						"fields":  map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/FieldError"}},
						"issues":  map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Issue"}},
						"details": map[string]any{"type": "object"},
					},
				},
				"FieldError": map[string]any{
					"type": "object", "required": []string{"field", "message"},
					"properties": map[string]any{"field": str, "message": str},
				},
				"Issue": map[string]any{
					"type": "object", "required": []string{"code", "statement"},
					"properties": map[string]any{
						"code":      map[string]any{"type": "string", "enum": []string{"INVALID_DOCUMENT", "UNKNOWN_ACTION", "ACTION_NOT_APPLICABLE"}},
						"statement": map[string]any{"type": "integer", "minimum": -1, "description": "The statement's index, or -1 for the document."},
						"action":    str,
					},
				},
				"Policy": map[string]any{
					"type": "object", "required": []string{"version", "statement"}, "additionalProperties": false,
					"properties": map[string]any{
						"version": map[string]any{"const": "2026-01-01"},
						"statement": map[string]any{"type": "array", "minItems": 1, "items": map[string]any{
							"type": "object", "required": []string{"effect", "action", "resource"}, "additionalProperties": false,
							"properties": map[string]any{
								"effect":   map[string]any{"enum": []string{"allow", "deny"}},
								"action":   map[string]any{"type": "array", "minItems": 1, "items": str},
								"resource": map[string]any{"type": "array", "minItems": 1, "items": str},
							},
						}},
					},
				},
			},
		},
	}
}
