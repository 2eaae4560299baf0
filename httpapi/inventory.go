package httpapi

import (
	"net/http"

	"stratum/join"
)

// The inventory of expected machines and the replacement of a member
// (JoinAdmin).

// maxInventoryBody bounds PUT /v1/admin/inventory: a few hundred bytes an
// entry, join.MaxInventoryEntries of them.
const maxInventoryBody = 8 << 20

func (a *API) putInventory(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, maxInventoryBody)
	if err != nil {
		return err
	}
	doc, err := join.DecodeInventory(body)
	if err != nil {
		return err
	}
	v, err := a.JoinAdmin.ApplyInventory(c.principal, doc)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (a *API) getInventory(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := a.JoinAdmin.Inventory()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// replaceMember replaces a member by a pending registration's machine.
func (a *API) replaceMember(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	joinID, reason, err := join.DecodeReplace(body)
	if err != nil {
		return err
	}
	v, err := a.JoinAdmin.ReplaceMember(c.principal, c.params.ByName("nodeId"), joinID, reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
