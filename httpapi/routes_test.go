package httpapi_test

import (
	"os"
	"strings"
	"testing"

	"stratum/iam"
)

// TestActionsWrittenOnce: an IAM action is written in the routes table
// (routes.go) and in iam's catalog, nowhere else in the HTTP layer, so a
// handler can never check another action than its route declares.
func TestActionsWrittenOnce(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") || e.Name() == "routes.go" {
			continue
		}
		b, err := os.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		sources[e.Name()] = string(b)
	}
	if len(sources) < 10 {
		t.Fatalf("read %d source files; is the test running in httpapi/?", len(sources))
	}
	for action := range iam.Actions {
		for name, src := range sources {
			if strings.Contains(src, `"`+action+`"`) {
				t.Errorf("%s writes the action %q: only the routes table names actions (the router authorizes, the handler gets c.action)", name, action)
			}
		}
	}
}

// TestRoutesNameCatalogActions: every action a route names is in iam's
// catalog (New panics otherwise) and every catalog action has a route.
func TestRoutesNameCatalogActions(t *testing.T) {
	named := map[string]bool{}
	for _, rt := range fullRoutes() {
		if rt.Action == "" {
			continue
		}
		if _, ok := iam.Actions[rt.Action]; !ok {
			t.Errorf("%s %s names %s, not in the catalog", rt.Method, rt.Path, rt.Action)
		}
		if rt.Auth != "bearer" && rt.Auth != "node-or-bearer" {
			t.Errorf("%s %s names %s but its auth %q carries no bearer token", rt.Method, rt.Path, rt.Action, rt.Auth)
		}
		named[rt.Action] = true
	}
	for action := range iam.Actions {
		if !named[action] {
			t.Errorf("catalog action %s is on no route", action)
		}
	}
}
