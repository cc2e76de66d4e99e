package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// AppsFile is the name, inside Config.StateDir, of the record of launched apps.
const AppsFile = "apps.json"

// App is one launched app as recorded in AppsFile.
type App struct {
	App  string   `json:"app"`
	Args []string `json:"args,omitempty"`
}

// launched apps, for activate_window by app and for the state record.
type appState struct {
	mu   sync.Mutex
	pids map[int]string // pid → app
	list []App
}

// pidsOf is the pids of the launched app, named as launched or by its
// base name.
func (s *appState) pidsOf(app string) map[int]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]bool{}
	for pid, a := range s.pids {
		if a == app || filepath.Base(a) == app {
			out[pid] = true
		}
	}
	return out
}

// ReadApps reads the apps recorded in dir (none if the record is missing).
func ReadApps(dir string) ([]App, error) {
	b, err := os.ReadFile(filepath.Join(dir, AppsFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var apps []App
	if err := json.Unmarshal(b, &apps); err != nil {
		return nil, fmt.Errorf("guest: %s: %w", AppsFile, err)
	}
	return apps, nil
}
