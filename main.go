// Command stratum is the founder appliance and its joiner in one binary.
package main

import (
	"os"

	"stratum/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
