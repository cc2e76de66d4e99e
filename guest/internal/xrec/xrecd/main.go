// Command xrecd is a test helper: a managed window on $DISPLAY that appends
// every button press it receives to a file, one "press BUTTON X Y" line each
// (root coordinates), so a test that can only reach a sandbox through its
// guest can read back where clicks landed.
//
// Usage: xrecd FILE WIDTH HEIGHT
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/shinken-rl/shinken/guest/internal/xrec"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: xrecd FILE WIDTH HEIGHT")
		os.Exit(2)
	}
	w, errW := strconv.Atoi(os.Args[2])
	h, errH := strconv.Atoi(os.Args[3])
	if errW != nil || errH != nil || w < 1 || h < 1 {
		fmt.Fprintln(os.Stderr, "xrecd: WIDTH and HEIGHT must be positive integers")
		os.Exit(2)
	}
	f, err := os.OpenFile(os.Args[1], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xrecd:", err)
		os.Exit(1)
	}
	r, err := xrec.NewWith(os.Getenv("DISPLAY"), 60, 60, w, h, "xrecd", xrec.Options{Managed: true, OnEvent: func(e xrec.Event) {
		if e.Type == "press" {
			fmt.Fprintf(f, "press %d %d %d\n", e.Button, e.X, e.Y)
		}
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "xrecd:", err)
		os.Exit(1)
	}
	<-r.Done()
}
