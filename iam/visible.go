package iam

// Visible keeps the items of a list the principal may read: the list
// action, and the read action when the resource type has one, must both
// allow the item's own resource. A deny on one item is thus never
// bypassed by listing the collection.
func Visible[T any](p Principal, items []T, listAction string, resource func(T) string) []T {
	read := readActions[listAction]
	out := make([]T, 0, len(items))
	for _, it := range items {
		r := resource(it)
		if p.Policy.Allows(listAction, r) && (read == "" || p.Policy.Allows(read, r)) {
			out = append(out, it)
		}
	}
	return out
}

// readActions names, for a list action, the action that reads one item.
var readActions = map[string]string{
	"join:ListRegistrations": "join:GetRegistration",
}
