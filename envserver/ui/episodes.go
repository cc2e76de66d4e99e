package ui

import (
	"errors"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/trajectory"
)

// Summary is one episode as the list shows it.
type Summary struct {
	ID         string     `json:"id"`
	Task       string     `json:"task"`
	EnvID      string     `json:"env_id"`
	ForkOf     string     `json:"fork_of,omitempty"`
	ExitReason string     `json:"exit_reason,omitempty"`
	Reward     float64    `json:"reward"`
	Steps      int        `json:"steps"`
	Errors     int        `json:"errors"` // steps that carry an error
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
}

// Live reports whether the episode is still running.
func (s *Summary) Live() bool { return s.EndedAt == nil }

func summarize(t *trajectory.Trajectory) *Summary {
	s := &Summary{ID: t.EpisodeID, Task: t.Task, EnvID: t.EnvID, ForkOf: t.ForkOf,
		ExitReason: string(t.ExitReason), Reward: t.Reward, Steps: len(t.Steps),
		StartedAt: t.StartedAt, EndedAt: t.EndedAt}
	for i := range t.Steps {
		if t.Steps[i].Error != nil {
			s.Errors++
		}
	}
	return s
}

// index keeps one summary per episode the source can return, refreshed at
// most once per period and only when asked. A finished episode is read once;
// a live one is read again at each refresh. Its size follows the source's
// own retention (the trajectory store's limit).
type index struct {
	src   Source
	every time.Duration

	refresh sync.Mutex // one refresh at a time
	mu      sync.Mutex
	byID    map[string]*Summary
	sorted  []*Summary // newest first
	at      time.Time
}

func newIndex(src Source, every time.Duration) *index {
	return &index{src: src, every: every, byID: map[string]*Summary{}}
}

// list returns the summaries, newest first, refreshing them when stale.
func (x *index) list() []*Summary {
	x.refresh.Lock()
	defer x.refresh.Unlock()
	x.mu.Lock()
	fresh := time.Since(x.at) < x.every
	x.mu.Unlock()
	if !fresh {
		x.update()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sorted
}

func (x *index) update() {
	ids := x.src.EpisodeIDs()
	x.mu.Lock()
	old := x.byID
	x.mu.Unlock()
	next := make(map[string]*Summary, len(ids))
	for _, id := range ids {
		if s := old[id]; s != nil && !s.Live() {
			next[id] = s
			continue
		}
		t, err := x.src.Episode(id)
		if err != nil {
			continue // evicted between the listing and the read
		}
		next[id] = summarize(t)
	}
	sorted := make([]*Summary, 0, len(next))
	for _, s := range next {
		sorted = append(sorted, s)
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.StartedAt.Equal(b.StartedAt) {
			return a.StartedAt.After(b.StartedAt)
		}
		return a.ID > b.ID
	})
	x.mu.Lock()
	x.byID, x.sorted, x.at = next, sorted, time.Now()
	x.mu.Unlock()
}

// filter is a parsed episode query.
type filter struct {
	task, exit           string
	minReward, maxReward *float64
	since, until         time.Time
	offset, limit        int
}

const maxPage = 200

func parseFilter(r *http.Request) (filter, error) {
	q := r.URL.Query()
	f := filter{task: q.Get("task"), exit: q.Get("exit"), limit: 50}
	num := func(name string) (*float64, error) {
		v := q.Get(name)
		if v == "" {
			return nil, nil
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, errors.New(name + ": not a number")
		}
		return &x, nil
	}
	tm := func(name string) (time.Time, error) {
		v := q.Get(name)
		if v == "" {
			return time.Time{}, nil
		}
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.UnixMilli(ms), nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return t, errors.New(name + ": want RFC 3339 or unix milliseconds")
		}
		return t, nil
	}
	var err error
	if f.minReward, err = num("min_reward"); err != nil {
		return f, err
	}
	if f.maxReward, err = num("max_reward"); err != nil {
		return f, err
	}
	if f.since, err = tm("since"); err != nil {
		return f, err
	}
	if f.until, err = tm("until"); err != nil {
		return f, err
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"offset", &f.offset}, {"limit", &f.limit}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return f, errors.New(p.name + ": want a non-negative integer")
			}
			*p.dst = n
		}
	}
	if f.limit == 0 || f.limit > maxPage {
		f.limit = maxPage
	}
	return f, nil
}

func (f *filter) match(s *Summary) bool {
	switch {
	case f.task != "" && s.Task != f.task:
		return false
	case f.exit == "running" && !s.Live():
		return false
	case f.exit == "none" && (s.Live() || s.ExitReason != ""):
		return false
	case f.exit != "" && f.exit != "running" && f.exit != "none" && s.ExitReason != f.exit:
		return false
	case f.minReward != nil && s.Reward < *f.minReward:
		return false
	case f.maxReward != nil && s.Reward > *f.maxReward:
		return false
	case !f.since.IsZero() && s.StartedAt.Before(f.since):
		return false
	case !f.until.IsZero() && s.StartedAt.After(f.until):
		return false
	}
	return true
}

// EpisodePage is one page of the filtered list, newest first.
type EpisodePage struct {
	Total  int        `json:"total"` // matching episodes
	Offset int        `json:"offset"`
	Items  []*Summary `json:"items"`
	Tasks  []string   `json:"tasks"` // every task seen, for the filter
	Exits  []string   `json:"exits"` // every exit reason seen
}

func (u *UI) apiEpisodes(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	all := u.index.list()
	page := EpisodePage{Offset: f.offset, Items: []*Summary{}}
	tasks, exits := map[string]bool{}, map[string]bool{}
	for _, s := range all {
		tasks[s.Task] = true
		if s.ExitReason != "" {
			exits[s.ExitReason] = true
		}
		if !f.match(s) {
			continue
		}
		if page.Total >= f.offset && len(page.Items) < f.limit {
			page.Items = append(page.Items, s)
		}
		page.Total++
	}
	page.Tasks, page.Exits = keys(tasks), keys(exits)
	writeJSON(w, r, page)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (u *UI) apiEpisode(w http.ResponseWriter, r *http.Request) {
	t, err := u.src.Episode(r.PathValue("id"))
	if err != nil {
		writeSourceError(w, err)
		return
	}
	writeJSON(w, r, t)
}

func writeSourceError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		writeJSONError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	writeJSONError(w, http.StatusInternalServerError, "internal", err.Error())
}

// recentPerTask is how many finished episodes of a task its stats cover.
const recentPerTask = 100

// TaskStats is a task with its record over its most recent episodes.
type TaskStats struct {
	Task
	Episodes   int     `json:"episodes"`  // finished episodes counted (at most recentPerTask)
	Running    int     `json:"running"`   // live episodes of the task
	PassRate   float64 `json:"pass_rate"` // share of counted episodes with reward > 0
	MeanSteps  float64 `json:"mean_steps"`
	MeanReward float64 `json:"mean_reward"`
}

func (u *UI) apiTasks(w http.ResponseWriter, r *http.Request) {
	tasks := u.src.Tasks()
	stats := make(map[string]*TaskStats, len(tasks))
	out := make([]*TaskStats, len(tasks))
	for i, t := range tasks {
		out[i] = &TaskStats{Task: t}
		stats[t.ID] = out[i]
	}
	for _, s := range u.index.list() { // newest first
		ts := stats[s.Task]
		if ts == nil {
			continue
		}
		if s.Live() {
			ts.Running++
			continue
		}
		if ts.Episodes >= recentPerTask {
			continue
		}
		ts.Episodes++
		if s.Reward > 0 {
			ts.PassRate++
		}
		ts.MeanSteps += float64(s.Steps)
		ts.MeanReward += s.Reward
	}
	for _, ts := range out {
		if ts.Episodes > 0 {
			n := float64(ts.Episodes)
			ts.PassRate /= n
			ts.MeanSteps /= n
			ts.MeanReward /= n
		}
	}
	writeJSON(w, r, map[string]any{"tasks": out, "recent": recentPerTask})
}
