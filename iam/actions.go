// Package iam holds users, API tokens, identity policy documents, the
// action catalog and the authorizer.
package iam

import "strings"

// ResourceType is the kind of resource an action applies to; a policy's
// resource "join-token/abc" has type "join-token".
type ResourceType string

// Resource types.
const (
	ResJoinToken        ResourceType = "join-token"
	ResJoinRegistration ResourceType = "join-registration"
	ResMember           ResourceType = "member"
	ResRelease          ResourceType = "release"
	ResNode             ResourceType = "node"
	ResIAMToken         ResourceType = "iam-token"
	ResIAMSession       ResourceType = "iam-session"
	ResAudit            ResourceType = "audit"
	ResInventory        ResourceType = "inventory"
)

// Actions maps every action to the resource type it applies to.
var Actions = map[string]ResourceType{
	"join:CreateJoinToken":      ResJoinToken,
	"join:ListJoinTokens":       ResJoinToken,
	"join:RevokeJoinToken":      ResJoinToken,
	"join:ListRegistrations":    ResJoinRegistration,
	"join:GetRegistration":      ResJoinRegistration,
	"join:ApproveNodeJoin":      ResJoinRegistration,
	"join:RejectNodeJoin":       ResJoinRegistration,
	"join:CancelNodeJoin":       ResJoinRegistration,
	"cluster:ListMembers":       ResMember,
	"cluster:RemoveMember":      ResMember,
	"cluster:ReplaceMember":     ResMember,
	"inventory:PutInventory":    ResInventory,
	"inventory:GetInventory":    ResInventory,
	"upgrade:DescribeRelease":   ResRelease,
	"upgrade:RecordRelease":     ResNode,
	"upgrade:ImportRelease":     ResRelease,
	"upgrade:SetClusterRelease": ResRelease,
	"upgrade:TrustReleaseKey":   ResRelease,
	"iam:CreateToken":           ResIAMToken,
	"iam:ListTokens":            ResIAMToken,
	"iam:RevokeToken":           ResIAMToken,
	"iam:ListSessions":          ResIAMSession,
	"iam:RevokeSession":         ResIAMSession,
	"audit:ReadAudit":           ResAudit,
}

// Resource names a resource of type t with id ("*" for a collection).
func Resource(t ResourceType, id string) string { return string(t) + "/" + id }

// matchPattern matches "*" and trailing-"*" wildcards.
func matchPattern(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	if strings.HasSuffix(pattern, "*") {
		return strings.HasPrefix(s, strings.TrimSuffix(pattern, "*"))
	}
	return pattern == s
}

// resourceTypeOf returns the type part of a resource pattern.
func resourceTypeOf(resource string) (ResourceType, bool) {
	t, _, ok := strings.Cut(resource, "/")
	if !ok {
		return "", false
	}
	for _, rt := range Actions {
		if string(rt) == t {
			return rt, true
		}
	}
	return "", false
}
