package iam

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"stratum/apierr"
	"stratum/strictjson"
	"stratum/wire"
)

// PolicyVersion is the only policy language version.
const PolicyVersion = "2026-01-01"

// Policy is an identity policy document (its shape is wire.Policy's);
// iam evaluates and validates it.
type Policy wire.Policy

// AdminPolicy allows everything; the bootstrap admin's sessions carry it.
func AdminPolicy() Policy {
	return Policy{Version: PolicyVersion, Statement: []wire.Statement{{Effect: "allow", Action: []string{"*"}, Resource: []string{"*"}}}}
}

// Finding codes.
const (
	FindingInvalidDocument     = "INVALID_DOCUMENT"
	FindingUnknownAction       = "UNKNOWN_ACTION"
	FindingActionNotApplicable = "ACTION_NOT_APPLICABLE"
)

// ParsePolicy decodes and validates a policy document, returning every
// finding at once as INVALID_POLICY.
func ParsePolicy(raw []byte) (Policy, error) {
	var p Policy
	var problems apierr.Fields
	if err := strictjson.Check(raw, reflect.TypeOf(p), &problems); err != nil {
		return p, invalidPolicy([]apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}}, "the policy document is not valid JSON: "+err.Error())
	}
	// Unknown, duplicate or mis-cased keys make a document ambiguous: a
	// second "effect" or a "Statement" beside "statement" would silently
	// win. Each is a finding of its statement.
	var issues []apierr.Issue
	seen := map[int]bool{}
	for _, f := range problems {
		if n := statementOf(f.Field); !seen[n] {
			seen[n] = true
			issues = append(issues, apierr.Issue{Code: FindingInvalidDocument, Statement: n})
		}
	}
	if len(issues) > 0 {
		return p, invalidPolicy(issues, fmt.Sprintf("the policy document has %d findings: unknown, repeated or mis-cased keys, or values of the wrong type", len(issues)))
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, invalidPolicy([]apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}}, "the policy document does not have the policy shape")
	}
	return p, p.Validate()
}

// statementOf returns N for a path under statement[N], else -1.
func statementOf(path string) int {
	rest, ok := strings.CutPrefix(path, "statement[")
	if !ok {
		return -1
	}
	num, tail, ok := strings.Cut(rest, "]")
	if !ok || (tail != "" && tail[0] != '.') || num == "" || strings.Trim(num, "0123456789") != "" || len(num) > 6 {
		return -1
	}
	n, _ := strconv.Atoi(num)
	return n
}

func invalidPolicy(issues []apierr.Issue, msg string) error {
	return &apierr.Error{Code: apierr.InvalidPolicy, Message: msg, Issues: issues}
}

// Validate lists every finding of p.
func (p Policy) Validate() error {
	var issues []apierr.Issue
	if p.Version != PolicyVersion {
		issues = append(issues, apierr.Issue{Code: FindingInvalidDocument, Statement: -1})
	}
	if len(p.Statement) == 0 {
		issues = append(issues, apierr.Issue{Code: FindingInvalidDocument, Statement: -1})
	}
	for i, s := range p.Statement {
		issues = append(issues, findings(s, i)...)
	}
	if len(issues) == 0 {
		return nil
	}
	return invalidPolicy(issues, fmt.Sprintf("the policy document has %d findings; fix them all and send it again", len(issues)))
}

func findings(s wire.Statement, i int) []apierr.Issue {
	var out []apierr.Issue
	if s.Effect != "allow" && s.Effect != "deny" {
		out = append(out, apierr.Issue{Code: FindingInvalidDocument, Statement: i})
	}
	if len(s.Action) == 0 || len(s.Resource) == 0 {
		out = append(out, apierr.Issue{Code: FindingInvalidDocument, Statement: i})
	}
	badResource := false
	var resTypes []ResourceType
	for _, r := range s.Resource {
		if r == "*" {
			resTypes = nil
			break
		}
		t, ok := resourceTypeOf(r)
		if !ok {
			badResource = true
			continue
		}
		resTypes = append(resTypes, t)
	}
	if badResource {
		out = append(out, apierr.Issue{Code: FindingInvalidDocument, Statement: i})
	}
	for _, a := range s.Action {
		matched := matchingActions(a)
		if len(matched) == 0 {
			out = append(out, apierr.Issue{Code: FindingUnknownAction, Statement: i, Action: a})
			continue
		}
		if len(resTypes) > 0 && !anyApplies(matched, resTypes) {
			out = append(out, apierr.Issue{Code: FindingActionNotApplicable, Statement: i, Action: a})
		}
	}
	return out
}

func matchingActions(pattern string) []string {
	var out []string
	for a := range Actions {
		if matchPattern(pattern, a) {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

func anyApplies(actions []string, types []ResourceType) bool {
	for _, a := range actions {
		for _, t := range types {
			if Actions[a] == t {
				return true
			}
		}
	}
	return false
}

// Allows evaluates p for action on resource: an explicit deny wins over
// any allow; nothing allowed is denied.
func (p Policy) Allows(action, resource string) bool {
	allowed := false
	for _, s := range p.Statement {
		if !matches(s, action, resource) {
			continue
		}
		if s.Effect == "deny" {
			return false
		}
		if s.Effect == "allow" {
			allowed = true
		}
	}
	return allowed
}

func matches(s wire.Statement, action, resource string) bool {
	return anyMatch(s.Action, action) && anyMatch(s.Resource, resource)
}

func anyMatch(patterns []string, s string) bool {
	for _, p := range patterns {
		if matchPattern(p, s) {
			return true
		}
	}
	return false
}
