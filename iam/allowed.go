package iam

import "sort"

// AllowedActions lists the catalog actions p may perform on the whole
// collection of each action's resource type ("join-registration/*"), for
// a client that hides what it cannot do. A policy that allows an action
// only on some ids is not listed: the server still decides each request.
func (p Principal) AllowedActions() []string {
	out := []string{}
	for action, t := range Actions {
		if p.Policy.Allows(action, Resource(t, "*")) {
			out = append(out, action)
		}
	}
	sort.Strings(out)
	return out
}
