package apierr

import (
	"fmt"
	"testing"

	"stratum/strictjson"
)

// A strict decoder's problems carry paths and no HTTP; the API error they
// become is INVALID_INPUT with each problem as a field.
func TestStrictJSONProblemsAreInvalidInput(t *testing.T) {
	var v struct {
		Name string `json:"name"`
	}
	err := fmt.Errorf("wrapped: %w", strictjson.Decode([]byte(`{"name":5,"extra":1}`), &v))
	e, ok := As(err)
	if !ok || e.Code != InvalidInput || len(e.Fields) != 2 || e.Fields[0].Field != "name" || e.Fields[1].Field != "extra" {
		t.Fatalf("As(%v) = %+v, %v", err, e, ok)
	}
	if CodeOf(fmt.Errorf("plain")) != Internal {
		t.Fatal("a plain error is not INTERNAL")
	}
}
