// Command gen rewrites docs/reference (make docs): the CLI pages from
// the command tree, the API page from httpapi/openapi.json.
package main

import (
	"fmt"
	"os"

	"stratum/internal/refdoc"
)

func main() {
	if err := refdoc.Write(".", "docs/reference"); err != nil {
		fmt.Fprintln(os.Stderr, "refdoc:", err)
		os.Exit(1)
	}
}
