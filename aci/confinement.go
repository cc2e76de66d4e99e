package aci

// Confinement is what a provider's sandboxes are confined by, as probed
// when the provider started (docs/api.md, GET /v1/spec): its namespaces,
// who the agent runs as, and its limits.
type Confinement struct {
	// Namespaces each sandbox has of its own: pid, mount, ipc, net, uts,
	// user.
	Namespaces []string `msgpack:"namespaces" json:"namespaces"`
	// UIDs says who the agent runs as: "per_sandbox" (a host uid of its
	// own, never 0), "shared" (one uid for every sandbox) or "caller".
	UIDs string `msgpack:"uids" json:"uids"`
	// AgentRoot says whether the agent runs as uid 0 of any namespace.
	AgentRoot bool `msgpack:"agent_root" json:"agent_root"`
	// NoNewPrivs: setuid binaries and file capabilities give nothing.
	NoNewPrivs bool `msgpack:"no_new_privs" json:"no_new_privs"`
	// ReadOnlyRoot: the agent's view of the OS is read-only and cannot be
	// remounted.
	ReadOnlyRoot bool `msgpack:"read_only_root" json:"read_only_root"`
	// Dev is the /dev a sandbox sees: "private" (a few safe nodes) or
	// "host".
	Dev string `msgpack:"dev" json:"dev"`
	// Cgroup is the cgroup version sandboxes are limited through ("v1",
	// "v2"; "engine" where a container engine applies the limits), "" for
	// none.
	Cgroup string `msgpack:"cgroup,omitempty" json:"cgroup,omitempty"`
	// Limits are the limits each sandbox has, by name, with their values;
	// a limit the host cannot give is absent. Names: memory_bytes, pids,
	// cpu_millis (CPU time in thousandths of a CPU), cpu_weight, io_weight,
	// nofile, nproc, fsize_bytes, shm_bytes, state_bytes (the writable
	// state's bound), snapshot_bytes (what one snapshot may copy; too_large
	// beyond), log_bytes (output kept per sandbox).
	Limits map[string]int64 `msgpack:"limits,omitempty" json:"limits,omitempty"`
	// Seccomp names the system-call filter, "" for none.
	Seccomp string `msgpack:"seccomp,omitempty" json:"seccomp,omitempty"`
}
