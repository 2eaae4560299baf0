package iam

import (
	"fmt"
	"strings"

	"stratum/apierr"
)

// FindingExceedsCaller marks a statement of a new token's policy that
// allows more than the token's creator may do.
const FindingExceedsCaller = "EXCEEDS_CALLER"

// WithinPolicy checks that everything child allows, parent allows too:
// each allowed action x resource pair must fall inside one of parent's
// allow statements and, where it meets one of parent's denies, child must
// deny that overlap itself. Patterns are compared as written, never
// expanded against today's action catalog, so a child pattern stays
// inside its parent when the catalog grows: trailing-"*" patterns compare
// as prefixes ("join:*" is within "join:*" and "*", not within
// "join:Get*"). It returns FORBIDDEN naming each statement and action.
func WithinPolicy(child, parent Policy) error {
	var issues []apierr.Issue
	for i, s := range child.Statement {
		if s.Effect != "allow" {
			continue
		}
		for _, action := range s.Action {
			if !child.pairWithin(action, s.Resource, parent) {
				issues = append(issues, apierr.Issue{Code: FindingExceedsCaller, Statement: i, Action: action})
			}
		}
	}
	if len(issues) == 0 {
		return nil
	}
	return &apierr.Error{Code: apierr.Forbidden, Issues: issues,
		Message: fmt.Sprintf("the new token's policy allows more than the calling token may do (%d findings): a token never outgrows its creator", len(issues))}
}

// pairWithin reports whether action on every resource pattern is allowed
// by parent and every overlap with a parent deny is denied by child.
func (child Policy) pairWithin(action string, resources []string, parent Policy) bool {
	for _, res := range resources {
		if child.denies(action, res) {
			continue // allows nothing
		}
		if !parent.allowsPattern(action, res) {
			return false
		}
		for _, d := range parent.Statement {
			if d.Effect != "deny" {
				continue
			}
			for _, da := range d.Action {
				a, ok := overlap(action, da)
				if !ok {
					continue
				}
				for _, dr := range d.Resource {
					if r, ok := overlap(res, dr); ok && !child.denies(a, r) {
						return false
					}
				}
			}
		}
	}
	return true
}

// allowsPattern: one allow statement covers both patterns.
func (p Policy) allowsPattern(action, resource string) bool {
	for _, s := range p.Statement {
		if s.Effect == "allow" && anyCovers(s.Action, action) && anyCovers(s.Resource, resource) {
			return true
		}
	}
	return false
}

// denies: one deny statement covers both patterns.
func (p Policy) denies(action, resource string) bool {
	for _, s := range p.Statement {
		if s.Effect == "deny" && anyCovers(s.Action, action) && anyCovers(s.Resource, resource) {
			return true
		}
	}
	return false
}

func anyCovers(patterns []string, inner string) bool {
	for _, p := range patterns {
		if covers(p, inner) {
			return true
		}
	}
	return false
}

// covers reports whether every string inner matches also matches outer.
func covers(outer, inner string) bool {
	if prefix, ok := strings.CutSuffix(outer, "*"); ok {
		return strings.HasPrefix(inner, prefix)
	}
	return outer == inner
}

// overlap returns the pattern of the strings both a and b match, if any:
// for prefix patterns and exact names it is always the narrower one.
func overlap(a, b string) (string, bool) {
	switch {
	case covers(a, b):
		return b, true
	case covers(b, a):
		return a, true
	}
	// Two exact names are handled above; a prefix and an exact name
	// overlap only when covers said so. Two prefixes overlap only when
	// one extends the other, which covers also decides.
	return "", false
}
