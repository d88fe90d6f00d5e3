// Command k1m-build is the patch-and-build machinery behind the Makefile:
// it applies the patch series to pristine module copies, writes the k1m
// go.work, computes version stamps and checks the series.
package main

import (
	"fmt"
	"os"

	"k1m.dev/k1m/build/tool"
)

func main() {
	if err := tool.Main(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "k1m-build:", err)
		os.Exit(1)
	}
}
