package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

func main() {
	c := client.New(os.Args[1], "", nil)
	ctx := context.Background()
	rr, err := c.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	if err != nil {
		panic(err)
	}
	env := rr.Results[0].EnvID
	rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{{Verb: aci.TypeText, Text: "ls -la /usr/bin | head -40" + strings.Repeat("x", 3)}, {Verb: aci.Key, Keys: "Return"}}}}, Observe: &api.Observe{Format: aci.FormatRaw}})
	if err != nil {
		panic(err)
	}
	o := rep.Results[0].Obs
	fmt.Println(o.W, o.H, len(rep.Frames[o.Frame]))
	os.WriteFile("/tmp/frame.raw", rep.Frames[o.Frame], 0o644)
	c.Close(ctx, env)
}
