package bench

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
)

func TestSettleMix(t *testing.T) {
	var m SettleMix
	if m.String() != "-" || m.Frac(3) != 0 {
		t.Fatalf("empty mix: %q %v", m, m.Frac(3))
	}
	for _, s := range []*aci.SettleInfo{
		{Idle: true}, {Idle: true, Damaged: true}, {Damaged: true}, {}, {Damaged: true, TimedOut: true}, nil,
		{Idle: true}, {Damaged: true}, {Frame: true, Damaged: true},
	} {
		m.Add(s)
	}
	want := SettleMix{N: 9, Idle: 3, Frame: 1, Damaged: 2, Quiet: 1, TimedOut: 1, None: 1}
	if m != want {
		t.Fatalf("mix %+v, want %+v", m, want)
	}
	if got := m.String(); got != "idle 33% / frame 11% / damaged 22% / quiet 11% / timed out 11% / unsettled 11%" {
		t.Fatalf("String() = %q", got)
	}
}

func TestOfficeDoc(t *testing.T) {
	calc := &configs.Task{ID: "c", Apps: []string{"libreoffice"},
		Params:        []configs.Param{{Name: "file", Choice: []string{"a.fods", "b.fods"}}},
		InstanceSetup: []configs.SetupStep{{PutFile: &configs.PutFile{Path: "~/{{.file}}", Text: "{{fods .tb}}"}}}}
	writer := &configs.Task{ID: "w", Apps: []string{"libreoffice"},
		InstanceSetup: []configs.SetupStep{{LaunchApp: &configs.LaunchApp{App: "libreoffice", Args: []string{"letter.fodt"}}}}}
	notOffice := &configs.Task{ID: "x", Apps: []string{"mousepad"},
		InstanceSetup: []configs.SetupStep{{LaunchApp: &configs.LaunchApp{App: "mousepad", Args: []string{"a.fods"}}}}}
	neither := &configs.Task{ID: "n", Apps: []string{"libreoffice"}}
	for _, c := range []struct {
		t    *configs.Task
		want string
	}{{calc, "calc"}, {writer, "writer"}, {notOffice, ""}, {neither, ""}} {
		if got := officeDoc(c.t); got != c.want {
			t.Errorf("officeDoc(%s) = %q, want %q", c.t.ID, got, c.want)
		}
	}
}

func TestPickApps(t *testing.T) {
	tasks := configs.Tasks{
		"xterm-b":             {ID: "xterm-b", Apps: []string{"xterm"}},
		"xterm-a":             {ID: "xterm-a", Apps: []string{"xterm"}},
		"feh-x":               {ID: "feh-x", Apps: []string{"feh", "xterm"}},
		"mousepad-fix-config": {ID: "mousepad-fix-config", Apps: []string{"mousepad"}},
		"mousepad-a":          {ID: "mousepad-a", Apps: []string{"mousepad"}},
		"browse":              {ID: "browse", Apps: []string{"chromium"}},
		"shop-x":              {ID: "shop-x", Apps: []string{"chromium"}, InstanceSetup: []configs.SetupStep{{Web: &configs.Web{App: "shop"}}}},
		"calc-x": {ID: "calc-x", Apps: []string{"libreoffice"},
			InstanceSetup: []configs.SetupStep{{PutFile: &configs.PutFile{Path: "~/t.fods"}}}},
	}
	got := map[string]string{}
	for _, p := range pickApps(tasks) {
		got[p.kind.App] = p.task
		if (p.task == "") != (p.skip != "") {
			t.Errorf("%s: task %q, skip %q", p.kind.App, p.task, p.skip)
		}
		if p.kind.App == "writer" && !strings.Contains(p.skip, ".fodt") {
			t.Errorf("writer skip note %q", p.skip)
		}
	}
	want := map[string]string{"xterm": "xterm-a", "mousepad": "mousepad-fix-config", "chromium": "shop-x", "calc": "calc-x", "writer": ""}
	for app, id := range want {
		if got[app] != id {
			t.Errorf("%s: picked %q, want %q", app, got[app], id)
		}
	}
	ids := appTasks(tasks, "browse")
	if strings.Join(ids, ",") != "xterm-a,mousepad-fix-config,shop-x,calc-x,browse" {
		t.Errorf("appTasks = %v", ids)
	}
	if clickFor(tasks["calc-x"]) != appKinds[3].Click || clickFor(tasks["browse"]) != [2]int{640, 400} {
		t.Errorf("clickFor: %v %v", clickFor(tasks["calc-x"]), clickFor(tasks["browse"]))
	}
}

func TestAppsTablesRender(t *testing.T) {
	a := &Apps{Resets: 1, Steps: 1, Rows: []AppRow{
		{App: "xterm", Task: "xterm-hello-file", Word: "hello", GoldenMS: 900, Reset: Dist{N: 1, P50: 40, P95: 40},
			ClickStep: StepStats{Dist: Dist{N: 1, P50: 12}, Settle: SettleMix{N: 1, Idle: 1}}, TypeStep: StepStats{Dist: Dist{N: 1, P50: 30}}},
		{App: "writer", Skipped: "no shipped task"},
		{App: "calc", Task: "calc-x", Error: "first reset: timeout | x"},
	}}
	md := appsMarkdown(a)
	for _, want := range []string{"## Real applications", "| xterm | xterm-hello-file | 900", "| writer | - | skipped: no shipped task",
		"| calc | calc-x | failed: first reset: timeout / x", "| xterm | type hello | 30", "idle 100%"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
